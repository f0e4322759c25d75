// The byte tokenizer, the UTF-8 stream decoder and the chat template's prefix stability; the
// SentencePiece tokenizer of checkpoints on a model trained here.

#include "serve/tokenizer.h"

#include <gtest/gtest.h>

#include <sentencepiece_processor.h>

#include <fstream>
#include <random>

#include "serve/checkpoint_test_util.h"
#include "store/temp_dir.h"

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

// One SentencePiece model for the suite (training takes about a second).
class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new store::TempDir;
    Status s = testing::train_test_tokenizer(dir_->path());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    path_ = dir_->path() + "/tokenizer.model";
    auto tok = load_sentencepiece(path_);
    ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
    tok_ = new std::shared_ptr<const Tokenizer>(std::move(tok).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete dir_;
  }
  static const Tokenizer& tok() { return **tok_; }
  static inline store::TempDir* dir_ = nullptr;
  static inline std::string path_;
  static inline std::shared_ptr<const Tokenizer>* tok_ = nullptr;
};

TEST_F(SentencePieceTest, DecodesWhatLibsentencepieceDecodes) {
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(path_).ok());
  EXPECT_EQ(tok().vocab_size(), sp.GetPieceSize());
  EXPECT_EQ(tok().eos(), sp.eos_id());
  // Text the model was trained on, text it was not (byte fallback), and a new word.
  for (const std::string text : {"The query planner reads rows from disk.",
                                 "Über données, 世界 🚀 ok?", "zebra quantum 42"}) {
    const std::vector<int32_t> ids = tok().encode(text);
    std::vector<int> sp_ids;
    ASSERT_TRUE(sp.Encode(text, &sp_ids).ok());
    EXPECT_EQ(ids, std::vector<int32_t>(sp_ids.begin(), sp_ids.end()));
    std::string sp_text;
    ASSERT_TRUE(sp.Decode(sp_ids, &sp_text).ok());
    EXPECT_EQ(sp_text, text);
    // As a chat message (the first word's boundary space dropped) it is libsentencepiece's text;
    // as a completion it keeps the space that joins it to the prompt.
    TokenTextStream message(tok(), true);
    EXPECT_EQ(message.push(ids) + message.finish(), sp_text);
    TokenTextStream completion(tok(), false);
    EXPECT_EQ(completion.push(ids) + completion.finish(), " " + sp_text);
  }
}

TEST_F(SentencePieceTest, AByteFallbackCharacterIsHeldBackUntilItIsWhole) {
  const std::vector<int32_t> ids = tok().encode("🚀");  // not in the corpus: 4 byte pieces
  ASSERT_GE(ids.size(), 4u);
  TokenTextStream s(tok(), true);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    out += s.push(std::span<const int32_t>(&ids[i], 1));
  }
  EXPECT_EQ(out.find("\xF0"), std::string::npos) << "a partial character was sent";
  out += s.push(std::span<const int32_t>(&ids.back(), 1));
  EXPECT_EQ(out + s.finish(), "🚀");
  // Ids past the pieces (a checkpoint's vocabulary may be larger) and control ids are not text.
  EXPECT_EQ(tok().decode(std::vector<int32_t>{tok().eos(), 100000, -1}), "");
}

TEST_F(SentencePieceTest, TheLlamaChatLayoutKeepsEarlierTurnsTokens) {
  ReplyMemo memo;
  std::vector<ChatMessage> conv = {{"system", "Be brief."}, {"user", "Which index?"}};
  auto p1 = chat_prompt(tok(), conv, &memo);
  ASSERT_TRUE(p1.is_ok());
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(path_).ok());
  std::vector<int> want1{sp.bos_id()};
  std::vector<int> body;
  ASSERT_TRUE(sp.Encode("[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhich index? [/INST]", &body).ok());
  want1.insert(want1.end(), body.begin(), body.end());
  EXPECT_EQ(*p1, std::vector<int32_t>(want1.begin(), want1.end()));
  // A reply whose tokens are not what its text encodes to (pieces the encoder would merge).
  std::vector<int32_t> generated;
  for (const char* w : {"\xE2\x96\x81", "t", "h", "e"}) {
    const int id = sp.PieceToId(w);
    ASSERT_NE(id, sp.unk_id()) << w;
    generated.push_back(id);
  }
  const std::string text = tok().decode(generated);
  ASSERT_EQ(text, "the");
  ASSERT_NE(tok().encode(text), generated);
  memo.remember(*p1, text, generated);
  conv.push_back({"assistant", text});
  conv.push_back({"user", "And then?"});
  auto p2 = chat_prompt(tok(), conv, &memo);
  ASSERT_TRUE(p2.is_ok());
  std::vector<int32_t> want = *p1;
  want.insert(want.end(), generated.begin(), generated.end());
  want.push_back(tok().eos());
  want.push_back(sp.bos_id());
  ASSERT_GE(p2->size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), p2->begin()));
  // Roles are checked as in the byte layout.
  conv.push_back({"wizard", "x"});
  auto bad = chat_prompt(tok(), conv, &memo);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("messages[4].role"), std::string::npos);
}

TEST(SentencePiece, AMissingOrInvalidModelIsAnErrorNamingTheFile) {
  store::TempDir dir;
  auto missing = load_sentencepiece(dir.path() + "/tokenizer.model");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(missing.status().is_not_found());
  EXPECT_NE(missing.status().message().find("tokenizer.model"), std::string::npos);
  std::ofstream(dir.path() + "/tokenizer.model") << "not a model";
  auto garbage = load_sentencepiece(dir.path() + "/tokenizer.model");
  ASSERT_FALSE(garbage.is_ok());
  EXPECT_TRUE(garbage.status().is_invalid_argument()) << garbage.status().to_string();
  EXPECT_NE(garbage.status().message().find("not a SentencePiece model"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::serve
