// flotilla/git/git.h
//
// Everything in flotilla::git (libgit2 1.5 behind a libgit2-free API): ls-remote, bare mirrors, credentials,
// known_hosts, URL checks and the error mapping. See libs/git/README.md.
#pragma once

#include "flotilla/git/credentials.h"
#include "flotilla/git/errors.h"
#include "flotilla/git/known_hosts.h"
#include "flotilla/git/mirror.h"
#include "flotilla/git/remote.h"
#include "flotilla/git/url.h"
