// The PS's stats and startup structs (ps/types.h) <-> their brook.v1
// messages, for the Stats and FenceClients calls: the server adapter encodes
// what the client decodes, from one definition. Options and checkpoint infos
// are ps/config_codec.h's (the PS persists them too). Thread-safe.
#pragma once

#include "ps/types.h"

namespace brook::v1 {
class PsStartup;
class StatsResponse;
}  // namespace brook::v1

namespace brook::ps::wire {

void ToProto(const StartupInfo& s, v1::PsStartup* p);
StartupInfo FromProto(const v1::PsStartup& p);
void ToProto(const ServerStats& s, v1::StatsResponse* p);
ServerStats FromProto(const v1::StatsResponse& p);

}  // namespace brook::ps::wire
