// libs/bus/src/owned_impl_members.h
//
// Private to the bus library: the members of detail::OwnedImpl (flotilla/bus/owned_impl.h). A source that
// completes an Impl instantiates its owner here: `template class detail::OwnedImpl<Impl, std::unique_ptr<Impl>>;`.
#pragma once

#include <utility>

#include "flotilla/bus/owned_impl.h"

namespace flotilla::bus::detail {

template <typename Impl, typename Ptr>
OwnedImpl<Impl, Ptr>::OwnedImpl() = default;

template <typename Impl, typename Ptr>
OwnedImpl<Impl, Ptr>::OwnedImpl(Ptr impl) : impl_(std::move(impl)) {}

template <typename Impl, typename Ptr>
OwnedImpl<Impl, Ptr>::OwnedImpl(OwnedImpl&&) noexcept = default;

template <typename Impl, typename Ptr>
OwnedImpl<Impl, Ptr>& OwnedImpl<Impl, Ptr>::operator=(OwnedImpl&&) noexcept = default;

template <typename Impl, typename Ptr>
OwnedImpl<Impl, Ptr>::~OwnedImpl() = default;

}  // namespace flotilla::bus::detail
