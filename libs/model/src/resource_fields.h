// flotilla/model/src/resource_fields.h
//
// The field lists of the resource kinds' status structs (codec_status.cpp), for codec_resources.cpp's dispatch.
#pragma once

#include "decoder.h"
#include "flotilla/model/resources.h"

namespace flotilla::model::detail {

void fields(Reader& v, GitRepoStatus& s);
void fields(Writer& v, const GitRepoStatus& s);
void fields(Reader& v, ClusterStatus& s);
void fields(Writer& v, const ClusterStatus& s);
void fields(Reader& v, ClusterGroupStatus& s);
void fields(Writer& v, const ClusterGroupStatus& s);
void fields(Reader& v, BundleStatus& s);
void fields(Writer& v, const BundleStatus& s);
void fields(Reader& v, BundleDeploymentStatus& s);
void fields(Writer& v, const BundleDeploymentStatus& s);

//! The status of any kind: `v.plain("status", out.status, kStatusFields)`.
struct StatusFieldList {
  template <typename V, typename S>
  void operator()(V& v, S& s) const {
    fields(v, s);
  }
};
inline constexpr StatusFieldList kStatusFields{};

}  // namespace flotilla::model::detail
