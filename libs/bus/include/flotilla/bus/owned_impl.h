// flotilla/bus/owned_impl.h
//
// What the move-only objects the bus library hands out (Message, PullConsumer, KvWatcher) have in common: each owns
// the library's state behind it (`Impl`, defined in libs/bus/src so nats.h stays out of the public headers), is
// empty when default-constructed, and is moved, never copied. The members are defined in libs/bus/src, where Impl
// is complete (owned_impl_members.h).
#pragma once

namespace flotilla::bus::detail {

//! The owner of an `Impl` through `Ptr` (std::unique_ptr<Impl>, or std::shared_ptr<Impl> where the library keeps
//! the state alive elsewhere too). A class derives from it and inherits its constructors.
template <typename Impl, typename Ptr>
class OwnedImpl {
 public:
  //! Empty: the object is not bound to anything (see each class for what its calls then do).
  OwnedImpl();
  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit OwnedImpl(Ptr impl);
  OwnedImpl(OwnedImpl&&) noexcept;
  OwnedImpl& operator=(OwnedImpl&&) noexcept;
  ~OwnedImpl();

 protected:
  Ptr impl_;
};

}  // namespace flotilla::bus::detail
