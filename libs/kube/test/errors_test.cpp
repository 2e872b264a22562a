// The mapping from API answers to error kinds, in one table.
#include "flotilla/kube/errors.h"

#include <gtest/gtest.h>

#include "flotilla/kube/client.h"

namespace flotilla::kube {
namespace {

std::string statusBody(int code, const std::string& reason, const std::string& message) {
  return Json::obj({{"kind", "Status"},
                    {"apiVersion", "v1"},
                    {"status", "Failure"},
                    {"reason", reason},
                    {"message", message},
                    {"code", code}})
      .dump();
}

struct KindCase {
  int status;
  ErrorKind kind;
};

class ErrorKindTest : public ::testing::TestWithParam<KindCase> {};

TEST_P(ErrorKindTest, HttpStatusDecidesTheKind) {
  const auto& c = GetParam();
  Error e = apiError(c.status, statusBody(c.status, "Reason", "the message"), "GET /x");
  EXPECT_EQ(e.kind, c.kind) << c.status;
  EXPECT_EQ(e.message, "the message");
  EXPECT_EQ(httpStatusOf(e), c.status);
  EXPECT_EQ(e.where, "GET /x: HTTP " + std::to_string(c.status));
}

INSTANTIATE_TEST_SUITE_P(Kube, ErrorKindTest,
                         ::testing::Values(KindCase{400, ErrorKind::kInvalid}, KindCase{422, ErrorKind::kInvalid},
                                           KindCase{401, ErrorKind::kPermanent}, KindCase{403, ErrorKind::kPermanent},
                                           KindCase{404, ErrorKind::kNotFound}, KindCase{409, ErrorKind::kConflict},
                                           KindCase{410, ErrorKind::kConflict}, KindCase{429, ErrorKind::kTransient},
                                           KindCase{500, ErrorKind::kTransient}, KindCase{503, ErrorKind::kTransient},
                                           KindCase{504, ErrorKind::kTransient}, KindCase{418, ErrorKind::kInternal}));

TEST(KubeErrorsTest, GoneIsAConflictThatIsGone) {
  Error gone = apiError(410, statusBody(410, "Expired", "too old resource version: 1 (200)"), "WATCH /api/v1/x");
  EXPECT_TRUE(isGone(gone));
  EXPECT_EQ(gone.kind, ErrorKind::kConflict);
  Error conflict = apiError(409, statusBody(409, "Conflict", "apply conflict"), "PATCH /x");
  EXPECT_FALSE(isGone(conflict));
  EXPECT_FALSE(isGone(makeError(ErrorKind::kConflict, "other")));
  EXPECT_EQ(httpStatusOf(makeError(ErrorKind::kTransient, "refused", "connect to x")), 0);
}

TEST(KubeErrorsTest, WatchErrorEventStatusUsesItsCode) {
  auto status = Json::parse(statusBody(410, "Expired", "too old resource version"));
  ASSERT_TRUE(status.ok());
  Error e = statusError(*status, "WATCH /api/v1/configmaps");
  EXPECT_TRUE(isGone(e));
  EXPECT_EQ(e.message, "too old resource version");
}

// Apply conflicts: causes not already in the message are appended so the field and manager are visible.
TEST(KubeErrorsTest, CausesAreAppendedWhenMissing) {
  Json status = Json::obj({{"kind", "Status"}, {"code", 409}, {"reason", "Conflict"}, {"message", "Apply failed"}});
  status["details"]["causes"].push(
      Json::obj({{"type", "FieldManagerConflict"}, {"message", "conflict with \"a\""}, {"field", ".data.k"}}));
  Error e = apiError(409, status.dump(), "PATCH /x");
  EXPECT_EQ(e.kind, ErrorKind::kConflict);
  EXPECT_EQ(e.message, "Apply failed; .data.k: conflict with \"a\"");
  // Already mentioned: not repeated.
  status["message"] = "Apply failed with 1 conflict: conflict with \"a\" using v1: .data.k";
  EXPECT_EQ(apiError(409, status.dump(), "PATCH /x").message, status.getString("message"));
}

// Server-side apply reports a patch that does not fit the schema as a 500 (kubernetes#122480, #139253): it is
// still the caller's input, so kInvalid, not a transient error to retry forever.
TEST(KubeErrorsTest, ApplySchemaErrorsReportedAs500AreInvalid) {
  Error e = apiError(500,
                     statusBody(500, "",
                                "failed to create typed patch object (ns/x; /v1, Kind=ConfigMap): .data: "
                                "expected map, got &{5}"),
                     "PATCH /x");
  EXPECT_EQ(e.kind, ErrorKind::kInvalid);
  EXPECT_EQ(httpStatusOf(e), 500);
  EXPECT_EQ(apiError(500, statusBody(500, "InternalError", "etcdserver: request timed out"), "PATCH /x").kind,
            ErrorKind::kTransient);
}

TEST(KubeErrorsTest, NonStatusBodyIsQuoted) {
  Error e = apiError(502, "<html>bad gateway</html>", "GET /x");
  EXPECT_EQ(e.kind, ErrorKind::kTransient);
  EXPECT_NE(e.message.find("without a Status object: <html>bad gateway</html>"), std::string::npos);
  Error empty = apiError(503, "", "GET /x");
  EXPECT_EQ(empty.message, "HTTP 503 without a Status object");
}

TEST(KubeErrorsTest, ApiVersionAndEncoding) {
  auto core = splitApiVersion("v1");
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(core->first, "");
  EXPECT_EQ(core->second, "v1");
  auto apps = splitApiVersion("apps/v1");
  ASSERT_TRUE(apps.ok());
  EXPECT_EQ(apps->first, "apps");
  for (const char* bad : {"", "/v1", "apps/", "a/b/c"}) {
    auto r = splitApiVersion(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalid);
  }
  EXPECT_EQ(urlEncode("app=web,tier!=db"), "app%3Dweb%2Ctier%21%3Ddb");
  EXPECT_EQ(urlEncode("a-b_c.d~"), "a-b_c.d~");
}

}  // namespace
}  // namespace flotilla::kube
