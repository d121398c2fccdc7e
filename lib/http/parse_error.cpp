// Status codes and names of ParseError; see parse_error.h.
#include "http/parse_error.h"

namespace sluice::http {

uint16_t status_for(ParseError e) noexcept {
  switch (e) {
    case ParseError::kNone: return 0;
    case ParseError::kHeadTooLarge:
    case ParseError::kTooManyFields: return 431;
    case ParseError::kUnknownTransferCoding:
    case ParseError::kConnectNotAllowed:
    case ParseError::kUpgradeNotAllowed: return 501;
    // RFC 9110 15.6.6: the major version is understood, this one is not served.
    case ParseError::kUnsupportedVersion:
    case ParseError::kH2PriorKnowledgeNotAllowed: return 505;
    default: return 400;
  }
}

std::string_view to_string(ParseError e) noexcept {
  switch (e) {
    case ParseError::kNone: return "none";
    case ParseError::kBadMethod: return "bad_method";
    case ParseError::kBadTarget: return "bad_target";
    case ParseError::kFragmentInTarget: return "fragment_in_target";
    case ParseError::kBadVersion: return "bad_version";
    case ParseError::kUnsupportedVersion: return "unsupported_version";
    case ParseError::kObsFold: return "obs_fold";
    case ParseError::kWhitespaceBeforeColon: return "whitespace_before_colon";
    case ParseError::kBadFieldName: return "bad_field_name";
    case ParseError::kMissingColon: return "missing_colon";
    case ParseError::kBadFieldValue: return "bad_field_value";
    case ParseError::kBareCR: return "bare_cr";
    case ParseError::kBareLF: return "bare_lf";
    case ParseError::kBadContentLength: return "bad_content_length";
    case ParseError::kConflictingContentLength: return "conflicting_content_length";
    case ParseError::kContentLengthWithTransferEncoding: return "content_length_with_transfer_encoding";
    case ParseError::kTransferEncodingNotChunked: return "transfer_encoding_not_chunked";
    case ParseError::kUnknownTransferCoding: return "unknown_transfer_coding";
    case ParseError::kTransferEncodingInHttp10: return "transfer_encoding_in_http10";
    case ParseError::kBadChunk: return "bad_chunk";
    case ParseError::kMissingHost: return "missing_host";
    case ParseError::kDuplicateField: return "duplicate_field";
    case ParseError::kBadHost: return "bad_host";
    case ParseError::kConnectWithContent: return "connect_with_content";
    case ParseError::kBadH2Preface: return "bad_h2_preface";
    case ParseError::kHeadTooLarge: return "head_too_large";
    case ParseError::kTooManyFields: return "too_many_fields";
    case ParseError::kConnectNotAllowed: return "connect_not_allowed";
    case ParseError::kUpgradeNotAllowed: return "upgrade_not_allowed";
    case ParseError::kH2PriorKnowledgeNotAllowed: return "h2_prior_knowledge_not_allowed";
  }
  return "unknown";
}

}  // namespace sluice::http
