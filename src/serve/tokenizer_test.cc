// The byte tokenizer, the UTF-8 stream decoder and the chat template's prefix stability.

#include "serve/tokenizer.h"

#include <gtest/gtest.h>

#include <random>

namespace dualpath::serve {
namespace {

std::vector<int32_t> bytes_of(std::string_view s) { return ByteTokenizer().encode(s); }

TEST(ByteTokenizer, EncodesBytesAndDecodesThemBack) {
  ByteTokenizer tok;
  const std::string text = "héllo, 世界 🚀";
  EXPECT_EQ(tok.encode(text).size(), text.size());
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  // Special and unused ids are not text.
  std::vector<int32_t> t = tok.encode("ab");
  t.insert(t.begin() + 1, SpecialTokens::kEnd);
  t.push_back(400);
  EXPECT_EQ(tok.decode(t), "ab");
}

TEST(Utf8Decoder, InvalidSequencesBecomeReplacementCharacters) {
  ByteTokenizer tok;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok.decode(bytes_of("a\xFF" "b")), "a" + fffd + "b");          // never valid
  EXPECT_EQ(tok.decode(bytes_of("\xC0\xAF")), fffd + fffd);                // overlong '/'
  EXPECT_EQ(tok.decode(bytes_of("\xED\xA0\x80")), fffd + fffd + fffd);     // a surrogate
  EXPECT_EQ(tok.decode(bytes_of("\xE4\xB8" "x")), fffd + "x");             // cut short
  EXPECT_EQ(tok.decode(bytes_of("\xF0\x9F\x9A")), fffd);                   // cut at the end
  EXPECT_EQ(tok.decode(bytes_of("\xF4\x90\x80\x80")), fffd + fffd + fffd + fffd);  // > U+10FFFF
}

TEST(Utf8Decoder, RandomBytesAlwaysGiveValidUtf8) {
  std::mt19937 rng(7);
  auto valid = [](const std::string& s) {
    Utf8Decoder d;
    std::string again = d.push(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
    return again + d.finish() == s;  // valid UTF-8 passes through unchanged
  };
  for (int i = 0; i < 200; ++i) {
    std::vector<int32_t> t(1 + rng() % 40);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 256);
    EXPECT_TRUE(valid(ByteTokenizer().decode(t)));
  }
}

TEST(TokenTextStream, HoldsBackACharacterSplitAcrossChunks) {
  const std::vector<int32_t> t = bytes_of("a世b");  // 世 is 3 bytes
  TokenTextStream s;
  EXPECT_EQ(s.push(std::span(t).subspan(0, 2)), "a");
  EXPECT_EQ(s.push(std::span(t).subspan(2, 1)), "");
  EXPECT_EQ(s.push(std::span(t).subspan(3, 2)), "世b");
  EXPECT_EQ(s.finish(), "");
}

TEST(ChatTemplate, EarlierTurnsKeepTheirTokensWhenTheConversationGrows) {
  ByteTokenizer tok;
  ReplyMemo memo;
  std::vector<ChatMessage> conv = {{"system", "be brief"}, {"user", "hi"}};
  auto p1 = chat_prompt(tok, conv, &memo);
  ASSERT_TRUE(p1.is_ok());
  // The reply as generated: bytes that are not valid UTF-8 and a special token in the middle.
  const std::vector<int32_t> generated = {'o', 0xFF, SpecialTokens::kUser, 'k'};
  const std::string text = tok.decode(generated);
  memo.remember(*p1, text, generated);
  conv.push_back({"assistant", text});
  conv.push_back({"user", "more"});
  auto p2 = chat_prompt(tok, conv, &memo);
  ASSERT_TRUE(p2.is_ok());
  // Turn 2's prompt starts with turn 1's prompt and then the generated tokens, exactly.
  std::vector<int32_t> want = *p1;
  want.insert(want.end(), generated.begin(), generated.end());
  ASSERT_GE(p2->size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), p2->begin()));
  // Without the memo the text re-encodes differently (U+FFFD is 3 bytes, the special is gone).
  auto p3 = chat_prompt(tok, conv, nullptr);
  ASSERT_TRUE(p3.is_ok());
  EXPECT_FALSE(std::equal(want.begin(), want.end(), p3->begin()));
}

TEST(ChatTemplate, UnknownRoleIsAnErrorNamingIt) {
  std::vector<ChatMessage> conv = {{"user", "hi"}, {"wizard", "x"}};
  auto p = chat_prompt(ByteTokenizer(), conv, nullptr);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("messages[1].role = \"wizard\""), std::string::npos);
}

TEST(ReplyMemo, ForgetsTheLeastRecentlyUsed) {
  ReplyMemo memo(2);
  const std::vector<int32_t> prompt = {1, 2};
  memo.remember(prompt, "a", {1});
  memo.remember(prompt, "b", {2});
  ASSERT_TRUE(memo.find(prompt, "a").has_value());  // a is now the most recent
  memo.remember(prompt, "c", {3});
  EXPECT_TRUE(memo.find(prompt, "a").has_value());
  EXPECT_FALSE(memo.find(prompt, "b").has_value());
  EXPECT_EQ(memo.size(), 2u);
}

TEST(ReplyMemo, TwoConversationsWithTheSameReplyTextKeepTheirOwnTokens) {
  // Replies that are not text (the modeled backend's tokens) all read "": each conversation
  // must get its own reply's tokens back, not the last one remembered.
  ByteTokenizer tok;
  ReplyMemo memo;
  std::vector<ChatMessage> a = {{"user", "first conversation"}};
  std::vector<ChatMessage> b = {{"user", "second conversation"}};
  auto pa = chat_prompt(tok, a, &memo);
  auto pb = chat_prompt(tok, b, &memo);
  ASSERT_TRUE(pa.is_ok() && pb.is_ok());
  const std::vector<int32_t> ga = {300, 301}, gb = {400, 401};
  ASSERT_EQ(tok.decode(ga), tok.decode(gb));
  memo.remember(*pa, tok.decode(ga), ga);
  memo.remember(*pb, tok.decode(gb), gb);
  a.push_back({"assistant", ""});
  b.push_back({"assistant", ""});
  auto qa = chat_prompt(tok, a, &memo);
  auto qb = chat_prompt(tok, b, &memo);
  ASSERT_TRUE(qa.is_ok() && qb.is_ok());
  std::vector<int32_t> want_a = *pa, want_b = *pb;
  want_a.insert(want_a.end(), ga.begin(), ga.end());
  want_b.insert(want_b.end(), gb.begin(), gb.end());
  EXPECT_TRUE(std::equal(want_a.begin(), want_a.end(), qa->begin()));
  EXPECT_TRUE(std::equal(want_b.begin(), want_b.end(), qb->begin()));
}

}  // namespace
}  // namespace dualpath::serve
