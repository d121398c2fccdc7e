// FieldSet: case-insensitive lookup of tracked names, and what it refuses.
#include <gtest/gtest.h>

#include "http/field_set.h"

namespace sluice::http {
namespace {

TEST(FieldSet, KnowsTheBuiltInNamesInAnyCase) {
  const FieldSet s;
  EXPECT_EQ(s.find("Authorization"), id_of(KnownField::kAuthorization));
  EXPECT_EQ(s.find("AUTHORIZATION"), id_of(KnownField::kAuthorization));
  EXPECT_EQ(s.find("x-forwarded-for"), id_of(KnownField::kXForwardedFor));
  EXPECT_EQ(s.find("Cf-Connecting-Ip"), id_of(KnownField::kCfConnectingIp));
  EXPECT_EQ(s.find("transfer-encoding"), id_of(KnownField::kTransferEncoding));
  EXPECT_EQ(s.size(), static_cast<size_t>(KnownField::kCount));
}

TEST(FieldSet, DoesNotConfuseNearbyNames) {
  const FieldSet s;
  for (std::string_view n : {"Hos", "Hosts", "Authorizatio", "Transfer_Encoding", "Content-Lengthx", "X-Forwarded-Fo",
                             "Upgrade-Insecure-Requests", "Accept", "", "host "}) {
    EXPECT_EQ(s.find(n), -1) << n;
  }
  // '^' and '~' differ only in bit 0x20, which a naive case fold would drop.
  FieldSet t;
  ASSERT_TRUE(t.add("x~y").id);
  EXPECT_EQ(t.find("X^Y"), -1);
  EXPECT_GE(t.find("X~Y"), 0);
}

TEST(FieldSet, AddsPolicyNamesOnceEach) {
  FieldSet s;
  const auto a = s.add("X-Deployment");
  ASSERT_TRUE(a.id);
  EXPECT_EQ(*a.id, static_cast<FieldId>(KnownField::kCount));
  EXPECT_EQ(s.add("x-deployment").id, a.id);
  EXPECT_EQ(s.name(*a.id), "x-deployment");
  EXPECT_EQ(s.find("X-DEPLOYMENT"), *a.id);
}

TEST(FieldSet, RefusesWhatCannotBeAFieldName) {
  FieldSet s;
  EXPECT_EQ(s.add("").error, FieldSet::AddError::kEmpty);
  EXPECT_EQ(s.add("bad name").error, FieldSet::AddError::kNotAToken);
  EXPECT_EQ(s.add("x:y").error, FieldSet::AddError::kNotAToken);
  EXPECT_EQ(s.add(std::string(65, 'a')).error, FieldSet::AddError::kTooLong);
  EXPECT_FALSE(s.add("bad name").id);
}

TEST(FieldSet, HoldsAtMostTheTrackedMaximum) {
  FieldSet s;
  size_t added = s.size();
  for (int i = 0; added < kMaxTrackedFields; ++i, ++added) ASSERT_TRUE(s.add("x-custom-" + std::to_string(i)).id);
  EXPECT_EQ(s.add("one-too-many").error, FieldSet::AddError::kFull);
  for (int i = 0; i < static_cast<int>(kMaxTrackedFields - static_cast<size_t>(KnownField::kCount)); ++i) {
    EXPECT_GE(s.find("X-CUSTOM-" + std::to_string(i)), 0);
  }
}

}  // namespace
}  // namespace sluice::http
