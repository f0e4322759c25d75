// The built-in `tiny` model reads as English: its greedy chat replies, decoded by the byte
// tokenizer, are mostly dictionary words (/usr/share/dict/words, Debian's wamerican). Random
// weights give about none. The model runs here in-process (compute::CpuModel on the weights the
// binary carries); the served path is the same model behind the API (scripts/dict_share.py).
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <set>

#include "compute/cpu_model.h"
#include "compute/cpu_weights.h"
#include "compute/test_util.h"
#include "serve/tokenizer.h"

namespace dualpath::serve {
namespace {

std::string reply(const compute::CpuModel& model, const std::string& question, int max_tokens) {
  ByteTokenizer tok;
  auto prompt = chat_prompt(tok, std::vector<ChatMessage>{{"user", question}}, nullptr);
  EXPECT_TRUE(prompt.is_ok());
  if (!prompt.is_ok()) return {};
  return tok.decode(
      compute::testing::greedy_generate(model, *prompt, max_tokens, SpecialTokens::kEnd));
}

struct WordCount {
  int64_t found = 0, total = 0;
  double share() const { return total > 0 ? static_cast<double>(found) / total : 0.0; }
};

WordCount dictionary_words(const compute::CpuModel& model, const std::set<std::string>& dict,
                           std::string* sample) {
  const char* questions[] = {"What is a database?", "How do I create a table?",
                             "Explain what an index is.", "How does a transaction work?",
                             "What is a primary key?", "How do I join two tables?"};
  int64_t found = 0, total = 0;
  for (const char* q : questions) {
    const std::string r = reply(model, q, 120);
    if (sample->empty()) *sample = r;
    // A word: a run of two or more letters (single letters are all in the dictionary, and noise
    // is full of them). No std::regex: GCC 12 warns inside it under the sanitizers.
    std::string w;
    auto end_word = [&] {
      if (w.size() >= 2) {
        found += dict.count(w) > 0 ? 1 : 0;
        ++total;
      }
      w.clear();
    };
    for (char c : r) {
      if (std::isalpha(static_cast<unsigned char>(c)) != 0) {
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        end_word();
      }
    }
    end_word();
  }
  return {found, total};
}

TEST(BuiltInModel, ItsRepliesAreMostlyDictionaryWordsAndRandomWeightsAreNot) {
  std::ifstream f("/usr/share/dict/words");
  if (!f) GTEST_SKIP() << "no /usr/share/dict/words (apt-get install wamerican)";
  std::set<std::string> dict;
  for (std::string w; std::getline(f, w);) {
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!w.empty()) dict.insert(w);
  }
  auto config = compute::cpu_model_preset("tiny");
  ASSERT_TRUE(config.is_ok());
  auto trained = compute::builtin_weights(*config);
  ASSERT_TRUE(trained.is_ok()) << trained.status().to_string();
  auto random = compute::random_weights(*config, 1);
  ASSERT_TRUE(random.is_ok());
  std::string sample_trained, sample_random;
  const WordCount t = dictionary_words(compute::CpuModel(*trained), dict, &sample_trained);
  const WordCount r = dictionary_words(compute::CpuModel(*random), dict, &sample_random);
  EXPECT_GE(t.share(), 0.5) << "trained: " << sample_trained;
  // Noise has few runs of letters, and the short ones are often "words" (the dictionary holds
  // most two-letter strings): what tells the two apart is how many words there are.
  EXPECT_LT(4 * r.found, t.found) << "random: " << sample_random;
  std::printf("dictionary words: trained %lld of %lld (%.1f %%), random weights %lld of %lld\n"
              "  trained: %s\n",
              static_cast<long long>(t.found), static_cast<long long>(t.total), 100 * t.share(),
              static_cast<long long>(r.found), static_cast<long long>(r.total),
              sample_trained.substr(0, 160).c_str());
}

}  // namespace
}  // namespace dualpath::serve
