#include "flotilla/identity/permissions.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/server_config.h"

namespace flotilla::identity {
namespace {

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool mentions(const std::vector<std::string>& list, const std::string& text) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s.find(text) != std::string::npos; });
}

TEST(RolePermissionsTest, AnAgentMayUseOnlyItsOwnClustersSubjectsAndConsumer) {
  auto role = agentRole("c1");
  ASSERT_TRUE(role.ok()) << role.error().describe();
  const Permissions& p = role->permissions;
  EXPECT_EQ(role->inbox_prefix, "_INBOX.agent-c1");
  EXPECT_TRUE(has(p.publish_allow, "flotilla.status.c1.>"));
  EXPECT_TRUE(has(p.publish_allow, "flotilla.register.c1"));
  EXPECT_TRUE(has(p.publish_allow, "$JS.API.CONSUMER.MSG.NEXT.FLOTILLA_DEPLOY.agent-c1"));
  EXPECT_TRUE(has(p.publish_allow, "$JS.API.CONSUMER.INFO.FLOTILLA_DEPLOY.agent-c1"));
  EXPECT_TRUE(has(p.publish_allow, "$JS.ACK.FLOTILLA_DEPLOY.agent-c1.>"));
  EXPECT_EQ(p.subscribe_allow, std::vector<std::string>{"_INBOX.agent-c1.>"});
  for (const auto& subject : p.publish_allow) {
    EXPECT_EQ(subject.find("FLOTILLA_DEPLOY.>"), std::string::npos) << subject;
    EXPECT_FALSE(subject.starts_with("$KV.")) << subject;
    EXPECT_FALSE(subject.starts_with("$JS.API.STREAM.CREATE")) << subject;
    EXPECT_FALSE(subject.starts_with("$JS.API.CONSUMER.CREATE.FLOTILLA_DEPLOY")) << subject;
  }
  EXPECT_TRUE(has(p.publish_deny, "$KV.>"));
  EXPECT_TRUE(has(p.publish_deny, "$JS.API.STREAM.DELETE.>"));
  EXPECT_TRUE(has(p.publish_deny, "$JS.API.CONSUMER.DELETE.FLOTILLA_DEPLOY.>"));
  EXPECT_FALSE(p.allow_responses);
}

// Manifests come from the hub on the cluster's own subject: no read of the shared object store is left.
TEST(RolePermissionsTest, AnAgentAsksTheHubForManifestsOnItsOwnSubjectOnly) {
  auto role = agentRole("c1");
  ASSERT_TRUE(role.ok()) << role.error().describe();
  const Permissions& p = role->permissions;
  EXPECT_TRUE(has(p.publish_allow, "flotilla.manifest.c1"));
  EXPECT_FALSE(mentions(p.publish_allow, "OBJ_manifests"));
  EXPECT_FALSE(mentions(p.publish_allow, "$O."));
  EXPECT_FALSE(mentions(p.publish_allow, "$JS.FC."));
  EXPECT_FALSE(mentions(p.publish_allow, "flotilla.manifest.*"));
  EXPECT_TRUE(has(agentRole("prod.eu")->permissions.publish_allow, "flotilla.manifest.prod=2Eeu"));
  const Permissions& scheduler = schedulerRole().permissions;
  EXPECT_TRUE(has(scheduler.subscribe_allow, "flotilla.manifest.*"));
  EXPECT_TRUE(scheduler.allow_responses);
  for (const auto& other : {pollerRole(), bundlerRole(), readonlyRole()}) {
    EXPECT_FALSE(mentions(other.permissions.subscribe_allow, "flotilla.manifest")) << other.name;
  }
}

TEST(RolePermissionsTest, ClusterNamesAreEscapedIntoOneToken) {
  auto role = agentRole("prod.eu");
  ASSERT_TRUE(role.ok());
  EXPECT_TRUE(has(role->permissions.publish_allow, "flotilla.status.prod=2Eeu.>"));
  EXPECT_EQ(role->inbox_prefix, "_INBOX.agent-prod=2Eeu");
}

TEST(RolePermissionsTest, BadClusterNamesAndTokenIdsAreRefused) {
  for (const char* bad : {"", "UPPER", "a b", "c1.>", "-x", "a*"}) {
    auto role = agentRole(bad);
    ASSERT_FALSE(role.ok()) << bad;
    EXPECT_NE(role.error().message.find("is not a Kubernetes name"), std::string::npos) << role.error().message;
  }
  EXPECT_FALSE(registrationRole("Tok.en").ok());
  EXPECT_TRUE(registrationRole("tok-1").ok());
}

TEST(RolePermissionsTest, ReadonlyReadsButNeverWrites) {
  Role role = readonlyRole();
  const Permissions& p = role.permissions;
  for (const char* denied :
       {"$KV.>", "$O.>", "flotilla.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.CONSUMER.DELETE.>",
        "$JS.API.STREAM.CREATE.>", "$JS.API.CONSUMER.MSG.NEXT.FLOTILLA_DEPLOY.>", "$JS.ACK.FLOTILLA_DEPLOY.>",
        "$JS.API.CONSUMER.MSG.NEXT.KV_status.>", "$JS.ACK.FLOTILLA_COMMITS.>"}) {
    EXPECT_TRUE(has(p.publish_deny, denied)) << denied;
  }
  // The public events stream only: pull from a consumer and ack (docs/events/subscribing.md).
  EXPECT_TRUE(has(p.publish_allow, "$JS.API.CONSUMER.MSG.NEXT.FLOTILLA_EVENTS.*"));
  EXPECT_TRUE(has(p.publish_allow, "$JS.ACK.FLOTILLA_EVENTS.*.>"));
  for (const auto& subject : p.publish_allow) {
    if (subject.find("MSG.NEXT") != std::string::npos || subject.starts_with("$JS.ACK")) {
      EXPECT_NE(subject.find("FLOTILLA_EVENTS"), std::string::npos) << subject;
    }
  }
  for (const auto& subject : p.publish_deny) {
    EXPECT_EQ(subject.find("FLOTILLA_EVENTS"), std::string::npos) << subject;
  }
  EXPECT_TRUE(has(p.publish_allow, "$JS.API.DIRECT.GET.>"));
  EXPECT_TRUE(has(p.publish_allow, "$JS.API.STREAM.MSG.GET.>"));
  EXPECT_EQ(p.subscribe_allow, std::vector<std::string>{"_INBOX.readonly.>"});
}

TEST(RolePermissionsTest, HubServicesWriteOnlyTheirOwnKeys) {
  Role poller = pollerRole();
  EXPECT_TRUE(has(poller.permissions.publish_allow, "flotilla.commit.>"));
  EXPECT_TRUE(has(poller.permissions.publish_allow, "$KV.status.gitrepo.>"));
  EXPECT_FALSE(mentions(poller.permissions.publish_allow, "$KV.bundles"));
  EXPECT_FALSE(mentions(poller.permissions.publish_allow, "flotilla.deploy"));
  Role bundler = bundlerRole();
  EXPECT_TRUE(has(bundler.permissions.publish_allow, "$KV.bundles.>"));
  EXPECT_TRUE(has(bundler.permissions.publish_allow, "$JS.API.CONSUMER.MSG.NEXT.FLOTILLA_COMMITS.bundler"));
  EXPECT_FALSE(mentions(bundler.permissions.publish_allow, "$KV.deployments"));
  Role scheduler = schedulerRole();
  EXPECT_TRUE(scheduler.permissions.allow_responses);
  EXPECT_TRUE(has(scheduler.permissions.subscribe_allow, "flotilla.register.>"));
  EXPECT_FALSE(has(scheduler.permissions.subscribe_allow, "flotilla.register")) << "the shared subject is gone";
  EXPECT_TRUE(has(scheduler.permissions.publish_allow, "$JS.API.CONSUMER.CREATE.FLOTILLA_DEPLOY.>"));
  EXPECT_TRUE(has(scheduler.permissions.publish_allow, "$KV.clusters.lease.scheduler")) << "its replicas' lease";
  EXPECT_TRUE(has(scheduler.permissions.publish_allow, "$KV.clusters.lease.scheduler.>")) << "partition leases";
  EXPECT_TRUE(has(scheduler.permissions.publish_allow, "$KV.clusters.member.scheduler.>")) << "replica membership";
  EXPECT_TRUE(has(scheduler.permissions.publish_allow, "$JS.API.CONSUMER.MSG.NEXT.FLOTILLA_STATUS.*"))
      << "its partitions' durables";
  EXPECT_FALSE(mentions(scheduler.permissions.publish_allow, "CONSUMER.MSG.NEXT.FLOTILLA_COMMITS"));
  EXPECT_FALSE(mentions(scheduler.permissions.publish_allow, "$KV.gitrepos"));
  EXPECT_FALSE(mentions(poller.permissions.publish_allow, "lease")) << "only the scheduler takes the lease";
  for (const Role& role : {poller, bundler, scheduler}) {
    EXPECT_TRUE(has(role.permissions.publish_deny, "$JS.API.STREAM.DELETE.>")) << role.name;
    EXPECT_FALSE(mentions(role.permissions.publish_allow, "$KV.gitrepos.")) << role.name;  // the CLI writes specs
  }
  EXPECT_EQ(adminRole().permissions.publish_allow, std::vector<std::string>{">"});
}

// Each service may publish exactly the public events it sends (docs/events/cloudevents.md): the poller a GitRepo's,
// the bundler a bundle's render and its durable's terminated messages, the scheduler the roll-ups, deployments,
// clusters and terminated messages of its durables and (relayed) the agents'; the gateway and readonly none.
TEST(RolePermissionsTest, EachServicePublishesExactlyThePublicEventsItSends) {
  auto events = [](const Role& role) {
    std::vector<std::string> out;
    for (const auto& subject : role.permissions.publish_allow) {
      if (subject.starts_with("flotilla.events")) {
        out.push_back(subject);
      }
    }
    return out;
  };
  using List = std::vector<std::string>;
  EXPECT_EQ(events(pollerRole()), (List{"flotilla.events.gitrepo.>"}));
  EXPECT_EQ(events(bundlerRole()), (List{"flotilla.events.bundle.>", "flotilla.events.message.FLOTILLA_COMMITS.*"}));
  EXPECT_EQ(events(schedulerRole()),
            (List{"flotilla.events.bundle.>", "flotilla.events.bundledeployment.>", "flotilla.events.cluster.>",
                  "flotilla.events.message.FLOTILLA_BUNDLES.*", "flotilla.events.message.FLOTILLA_STATUS.*",
                  "flotilla.events.message.FLOTILLA_DEPLOY.*"}));
  EXPECT_EQ(events(gatewayRole()), List{});
  EXPECT_EQ(events(readonlyRole()), List{});
  EXPECT_TRUE(has(readonlyRole().permissions.publish_deny, "flotilla.>"));
}

// The gateway writes the specs of the CRs it mirrors and the hub's mode, nothing of the pipeline's own records.
TEST(RolePermissionsTest, TheGatewayWritesOnlyTheSpecsItMirrors) {
  Role gateway = gatewayRole();
  for (const char* subject : {"$KV.gitrepos.>", "$KV.clusters.group.>", "$KV.clusters.spec.>",
                              "$KV.clusters.deregistered.>", "$KV.clusters.hub.mode"}) {
    EXPECT_TRUE(has(gateway.permissions.publish_allow, subject)) << subject;
  }
  for (const char* other : {"$KV.clusters.cluster", "$KV.deployments", "$KV.bundles", "$KV.status.summary",
                            "flotilla.deploy", "flotilla.commit", "$O."}) {
    EXPECT_FALSE(mentions(gateway.permissions.publish_allow, other)) << other;
  }
  EXPECT_TRUE(has(gateway.permissions.publish_deny, "$JS.API.STREAM.DELETE.>"));
}

TEST(RolePermissionsTest, RegistrationTokensMayOnlyAskForCredentials) {
  auto role = registrationRole("t0k3n");
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(role->permissions.publish_allow, std::vector<std::string>{"flotilla.registration.t0k3n"});
  EXPECT_EQ(role->permissions.subscribe_allow, std::vector<std::string>{"_INBOX.registration-t0k3n.>"});
}

TEST(RolePermissionsTest, RoleForNamesUnknownRolesAndMissingSubjects) {
  auto unknown = roleFor("root");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown role \"root\""), std::string::npos);
  auto agent = roleFor("agent");
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.error().message.find("needs a cluster name"), std::string::npos);
  auto admin = roleFor("admin", "c1");
  ASSERT_FALSE(admin.ok());
  EXPECT_NE(admin.error().message.find("is not bound"), std::string::npos);
  EXPECT_EQ(roleFor("agent", "c2").value().subject, "c2");
  EXPECT_EQ(roleNames().size(), 8U);
  EXPECT_EQ(roleFor("gateway").value().name, "gateway");
}

// A client's CONNECT line carries its JWT: every role's must fit the server's max_control_line with room to spare.
TEST(RolePermissionsTest, EveryRolesJwtFitsTheServersControlLine) {
  auto account = KeyPair::generate(KeyType::kAccount).value();
  for (auto name : roleNames()) {
    std::string subject = name == "agent" ? "a-cluster-name-of-sixty-characters-is-still-a-valid-name-ok" : "";
    if (name == "registration") {
      subject = "token-1";
    }
    auto user = issueUser(account, account.publicKey(), roleFor(name, subject).value(), std::nullopt);
    ASSERT_TRUE(user.ok()) << name;
    EXPECT_LT(user->jwt.size(), static_cast<size_t>(kMaxControlLine) * 3 / 4) << name;
  }
}

TEST(ServerConfigTest, OperatorModeWithPreloadedAccountsAndMutualTls) {
  ServerConfig config{
      .operator_jwt = "eyJop",
      .system_account = "ASYS",
      .accounts = {{"ASYS", "eyJsys"}, {"AFLO", "eyJflo"}},
      .server_name = "hub",
      .tls = ServerTls{.cert_file = "/d/s.pem", .key_file = "/d/k.pem", .ca_file = "/d/ca.pem", .verify = true}};
  auto text = renderServerConfig(config);
  ASSERT_TRUE(text.ok()) << text.error().describe();
  for (const char* line : {"operator: \"eyJop\"\n", "system_account: ASYS\n", "resolver: MEMORY\n",
                           "  AFLO: \"eyJflo\"\n", "jetstream: enabled\n", "server_name: \"hub\"\n", "  verify: true\n",
                           "  ca_file: \"/d/ca.pem\"\n", "max_control_line: 16384\n"}) {
    EXPECT_NE(text->find(line), std::string::npos) << line << "\n" << *text;
  }
  config.resolver_dir = "/data/resolver";
  auto full = renderServerConfig(config);
  ASSERT_TRUE(full.ok());
  EXPECT_NE(full->find("resolver: {\n  type: full\n  dir: \"/data/resolver\"\n  allow_delete: false\n}\n"),
            std::string::npos)
      << *full;
  EXPECT_EQ(full->find("resolver: MEMORY"), std::string::npos);
  config.write_resolver = false;  // the hub chart's own config sets it
  auto included = renderServerConfig(config);
  ASSERT_TRUE(included.ok());
  EXPECT_EQ(included->find("resolver:"), std::string::npos) << *included;
  EXPECT_NE(included->find("resolver_preload: {"), std::string::npos);
  config.accounts.erase(config.accounts.begin());
  auto missing = renderServerConfig(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("system account"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::identity
