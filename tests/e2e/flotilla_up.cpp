// flotilla-up: the local demo behind `scripts/setup` / `scripts/up`. Starts the whole system on this machine —
// nats-server -js, a git server with an example repo, two Kubernetes API servers, and the four services as
// separate processes — registers a GitRepo for the example repo, waits until both clusters have its objects,
// then prints how to watch the system and push a change. Runs until Ctrl-C (or SIGTERM).
//
// By default the hub runs with its identities (operator-mode NATS over TLS, each service and agent with its own
// credentials; the CLI with the admin or read-only ones). `--insecure`: plain NATS without authentication.
// `--mutual-tls`: nats-server also requires a client certificate from the hub's CA of every client.
#include <cstdio>
#include <iostream>

#include <signal.h>

#include "flotilla/core/util.h"
#include "hub_fixture.h"

using namespace flotilla;

namespace {

const char* kExampleConfigMap = R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: greeting
data:
  message: hello from flotilla
)";

const char* kExampleNamespace = R"(apiVersion: v1
kind: Namespace
metadata:
  name: demo
)";

const char* kFleetYaml = R"(defaultNamespace: demo
labels:
  app: demo
)";

std::string gitRepoYaml(const std::string& url) {
  return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: demo\n  namespace: fleet-default\n"
         "spec:\n  repo: " +
         url + "\n  branch: main\n  paths:\n  - app\n  pollingInterval: 5s\n";
}

}  // namespace

//! How to run the CLI against the hub, with `identity`'s credentials on a secure hub.
std::string cliCommand(e2e::Hub& hub, const std::string& identity) {
  std::string command = e2e::Binaries::fromBuild().cli + " --nats-url " + hub.nats().url();
  for (const auto& flag : hub.natsFlags(identity)) {
    command += " " + flag;
  }
  return command;
}

int main(int argc, char** argv) {
  bool secure = true;
  bool mutual_tls = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];  // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic): argv
    if (arg == "--insecure") {
      secure = false;
    } else if (arg == "--mutual-tls") {
      mutual_tls = true;
    } else {
      std::cerr << "flotilla-up: unknown argument \"" << arg << "\" (--insecure: NATS without authentication or "
                << "TLS; --mutual-tls: every client also presents a certificate from the hub's CA)" << std::endl;
      return 2;
    }
  }
  if (mutual_tls && !secure) {
    std::cerr << "flotilla-up: --mutual-tls and --insecure exclude each other" << std::endl;
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::cout << "Starting nats-server, a git server, two Kubernetes API servers and the Flotilla services..."
            << std::endl;
  // The second cluster's agent enrolls with a registration token, as agents installed by the agent chart can.
  auto hub = e2e::Hub::start({.clusters = 2,
                              .share_clusters = false,
                              .secure = secure,
                              .enrolled_agents = secure ? size_t{1} : 0,
                              .mutual_tls = mutual_tls});
  if (!hub.ok()) {
    std::cerr << "flotilla-up: " << hub.error().describe() << std::endl;
    return 1;
  }
  auto& h = **hub;
  auto repo = h.git().createRepo("demo");
  if (!repo.ok()) {
    std::cerr << "flotilla-up: " << repo.error().describe() << std::endl;
    return 1;
  }
  auto commit = h.git().commitFiles("demo", "main",
                                    {{"app/fleet.yaml", kFleetYaml},
                                     {"app/namespace.yaml", kExampleNamespace},
                                     {"app/configmap.yaml", kExampleConfigMap}},
                                    "example app");
  if (!commit.ok()) {
    std::cerr << "flotilla-up: " << commit.error().describe() << std::endl;
    return 1;
  }
  auto applied = h.apply(gitRepoYaml(repo->http));
  if (!applied.ok()) {
    std::cerr << "flotilla-up: " << applied.error().describe() << "\n" << h.allLogs() << std::endl;
    return 1;
  }
  std::cout << "Waiting for the example to reach both clusters..." << std::endl;
  bool arrived = e2e::Hub::waitFor(
      [&] {
        for (size_t i = 0; i < h.clusterCount(); ++i) {
          if (!h.kube(i).get("v1", "ConfigMap", "demo", "greeting").ok()) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(120));
  if (!arrived) {
    std::cerr << "flotilla-up: the example did not arrive on both clusters within 2 minutes\n" << h.allLogs();
    return 1;
  }
  std::string cli = cliCommand(h, "admin");
  std::cout << "\nFlotilla is running. The example ConfigMap demo/greeting is on both clusters.\n\n";
  if (secure) {
    std::cout << "NATS runs in operator mode with TLS: every service and agent has its own credentials in "
              << h.authDir() << "/creds (CA " << h.authDir() << "/tls/ca.pem). The commands below use the admin\n"
              << "identity; the read-only one reads everything and changes nothing:\n"
              << "  " << cliCommand(h, "readonly") << " get clusters\n"
              << "  " << cliCommand(h, "readonly")
              << " events -f -o text   (the public CloudEvents; docs/events/subscribing.md)\n"
              << (mutual_tls ? "Mutual TLS: nats-server refuses a client without a certificate from that CA; each "
                               "identity has its own (" +
                                   h.authDir() + "/tls/<identity>.pem, flotilla auth issue --client-cert).\n"
                             : std::string())
              << "The second cluster's agent enrolled with a registration token: the scheduler's registrar gave it\n"
              << "credentials of its own (" << h.dir() << "/agent-1-store.creds), renewed before they expire.\n"
              << "More clusters: a token, flotilla auth issue --dir " << h.authDir()
              << " --role registration --token <id> --ttl 24h,\n"
              << "then flotilla-agent --cluster-name <name> --registration-creds " << h.authDir()
              << "/creds/registration-<id>.creds --creds-store <file> --nats-ca " << h.authDir() << "/tls/ca.pem"
              << (mutual_tls ? " --nats-cert <its certificate> --nats-key <its key>" : "") << " ...;\n"
              << "or issued credentials: flotilla auth issue --dir " << h.authDir()
              << " --role agent --cluster <name>\n\n";
  }
  std::cout << "Watch it:\n"
            << "  " << cli << " get gitrepos\n"
            << "  " << cli << " get bundledeployments\n"
            << "  " << cli << " describe gitrepo demo\n"
            << "  kubectl --kubeconfig " << h.cluster(0).kubeconfigPath() << " get configmap -n demo greeting -o yaml\n"
            << "  kubectl --kubeconfig " << h.cluster(1).kubeconfigPath()
            << " get configmap -n demo greeting -o yaml\n\n"
            << "Push a change (it arrives on both clusters within seconds):\n"
            << "  git clone " << repo->http << " /tmp/flotilla-demo && cd /tmp/flotilla-demo\n"
            << "  sed -i 's/hello from flotilla/hello again/' app/configmap.yaml\n"
            << "  git -c user.name=you -c user.email=you@example.com commit -am 'change greeting' && git push\n\n"
            << "Service logs: " << h.dir() << "/*.log   Metrics: curl the --http-addr of each service.\n"
            << "Press Ctrl-C to stop everything." << std::endl;
  int received = 0;
  sigwait(&signals, &received);
  std::cout << "Stopping..." << std::endl;
  return 0;
}
