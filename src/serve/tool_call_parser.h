#pragma once
// Tool calls in a reply, as vLLM's `--tool-call-parser hermes` reads them (docs/api.md "Tools"):
//
//   Let me look that up.
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// HermesToolCallParser takes the reply's text as it streams and splits it into content and
// calls: text outside <tool_call> blocks is content (whitespace next to a block dropped, so the
// content of a reply that only calls is empty); a block whose JSON is an object with a string
// "name" (and "arguments": an object, a JSON string of one, or absent) is a call; any other
// block stays content, verbatim. A block cut off by the end of the reply (max_tokens) counts if
// its JSON is whole. Text that could still become a tag or a call is held back, so what the
// pieces add up to does not depend on how the text was cut: streamed and whole replies agree.
// A reply without blocks comes out unchanged. Thread-compatible.

#include <string>
#include <string_view>
#include <vector>

namespace dualpath::serve {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // compact JSON of an object ("{}" when absent)
};

class HermesToolCallParser {
 public:
  struct Piece {
    std::string content;                // text to send now (may be empty)
    std::vector<ParsedToolCall> calls;  // calls completed now, in order
  };
  Piece push(std::string_view text);
  // The end of the reply: what was held back.
  Piece finish();
  int calls() const { return calls_; }

 private:
  void emit_outside(std::string_view text, Piece& out);
  void close_block(std::string_view inner, bool closed, Piece& out);

  std::string held_;  // outside a block: unsent text; inside: the block so far
  bool inside_ = false;
  bool after_call_ = false;  // whitespace right after a call is dropped
  int calls_ = 0;
};

}  // namespace dualpath::serve
