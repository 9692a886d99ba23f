// Byte offsets -> token positions in media prompts (engine/media_prompt.h), without a
// model: the builder's text_ends decide it, so the placement rules are checked on a
// hand-made prompt. The builder itself is checked on the vision pairs (vision_test.cpp,
// ServerVision.MessageEndsMapToTokenPositionsInMediaPrompts).
#include <gtest/gtest.h>

#include "engine/media_prompt.h"
#include "engine/prompt.h"

namespace {

// "ab<__media__>cd": tokens "a" "b", three layout/image rows, "c" "d". The marker spans
// bytes [2, 13); its rows sit at byte 3, just inside it.
ws::MediaPrompt sample() {
  ws::MediaPrompt mp;
  mp.tokens = {10, 11, -1, -2, -3, 12, 13};
  mp.text_ends = {1, 2, 3, 3, 3, 14, 15};
  return mp;
}

TEST(MediaPrompt, MessageEndsCountTokensEndingAtOrBeforeTheOffset) {
  const ws::MediaPrompt mp = sample();
  const std::vector<size_t> ends = {1, 2, 14, 15};
  EXPECT_EQ(ws::media_message_ends(mp, ends), (std::vector<int32_t>{1, 2, 6, 7}));
}

TEST(MediaPrompt, OffsetInsideAMarkerLandsAfterTheImage) {
  const ws::MediaPrompt mp = sample();
  const std::vector<size_t> inside = {5}, at_marker = {2}, after_marker = {13}, past = {100};
  EXPECT_EQ(ws::media_message_ends(mp, inside), (std::vector<int32_t>{5}));
  EXPECT_EQ(ws::media_message_ends(mp, at_marker), (std::vector<int32_t>{2}));  // before the image
  EXPECT_EQ(ws::media_message_ends(mp, after_marker), (std::vector<int32_t>{5}));
  EXPECT_EQ(ws::media_message_ends(mp, past), (std::vector<int32_t>{7}));
}

TEST(MediaPrompt, RepeatedPositionsAreDropped) {
  const std::vector<size_t> token_ends = {1, 2, 3}, byte_ends = {2, 2, 3};
  EXPECT_EQ(ws::token_positions(token_ends, byte_ends), (std::vector<int32_t>{2, 3}));
}

}  // namespace
