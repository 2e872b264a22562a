// flotilla/cli/redrive.h
//
// `flotilla redrive [all | <consumer> | <consumer>/<sequence>]`: re-derives the work of messages a consumer
// terminated (docs/pipeline.md "Delivery policy"). Every terminated message has a record in KV `status`
// (terminated.<stream>.<consumer>.<sequence>); without a selector the records are listed and nothing changes.
// For each selected record:
//   - the message is read back from its stream by sequence;
//   - if a newer message on the same subject exists (any stream but FLOTILLA_DEPLOY, whose subject is shared by
//     every bundle of a cluster and whose agent drops stale generations itself), the work was superseded: the
//     record is removed and nothing is republished;
//   - otherwise the message is published again on its subject (Nats-Msg-Id "<original id>/redrive/<record id>",
//     so running redrive twice publishes once) and the record is removed;
//   - a message older than its stream's max age cannot be read back: the record is kept and the command fails,
//     pointing at `flotilla force-sync` (which re-derives a GitRepo's whole pipeline from KV).
#pragma once

#include <iosfwd>
#include <string>

#include "flotilla/cli/hub_reader.h"

namespace flotilla::cli {

struct RedriveArgs {
  ConnectSettings connect;
  //! "" = list only; "all"; a consumer ("bundler", "scheduler", "agent-prod-1"); or "<consumer>/<sequence>".
  std::string selector;
};

//! Runs the command; exit codes as runCli (0 ok, 1 error).
int runRedrive(const RedriveArgs& args, std::ostream& out, std::ostream& err);

}  // namespace flotilla::cli
