#include "flotilla/poller/poll_status.h"

namespace flotilla::poller {

Result<PollStatus> decodePollStatus(std::string_view json) {
  return events::parseRecord<PollStatus>(json);
}

}  // namespace flotilla::poller
