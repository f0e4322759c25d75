// The official OpenAI Node client (any major: the module to import is argv[2], e.g. "openai" for
// v4 or "openai7", an npm alias of the current major) running an agent's conversation with
// tools against `dualpath serve --tool-call-parser hermes` (run by api_clients_test.sh): tools,
// an assistant turn with tool calls and null content, tool results as content parts, three turns
// (the last one streamed). Every turn is served, and turn n+1's cached_tokens covers turn n's
// prompt and reply, block-rounded down (all but the reply's last token: it was sampled, never
// run through the model). Prints one JSON line of what it saw.
const [moduleName, baseURL, apiKey, marker] = process.argv.slice(2);
const { default: OpenAI } = await import(moduleName);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const block = 64;
const out = { module: moduleName, turns: [] };
const fail = (what) => { console.error("FAIL: " + what); process.exitCode = 1; };

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather in a city today",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const messages = [
  { role: "system", content: `You are a weather agent (${marker}). Call tools when needed.` },
  { role: "user", content: [{ type: "text", text: "What is the weather in Paris " },
                            { type: "text", text: "and should I take an umbrella?" }] },
  { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
    function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } }] },
  { role: "tool", tool_call_id: "call_1",
    content: [{ type: "text", text: '{"temp_c": 14, "rain_mm": 3.5, "sky": "overcast"}' }] },
];
const model = (await client.models.list()).data[0].id;
let expected = 0;  // what the next turn must hit at least
for (let turn = 1; turn <= 3; ++turn) {
  const stream = turn === 3;
  const params = { model, messages, tools, tool_choice: "auto", parallel_tool_calls: true,
                   max_tokens: 24, temperature: 0 };
  let message, usage, finish;
  if (!stream) {
    const r = await client.chat.completions.create(params);
    message = r.choices[0].message;
    usage = r.usage;
    finish = r.choices[0].finish_reason;
  } else {
    const s = await client.chat.completions.create(
        { ...params, stream: true, stream_options: { include_usage: true } });
    message = { role: "assistant", content: "" };
    const calls = [];
    for await (const chunk of s) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta?.content) message.content += c.delta.content;
        for (const d of c.delta?.tool_calls ?? []) {
          calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } };
          if (d.id) calls[d.index].id = d.id;
          if (d.function?.name) calls[d.index].function.name += d.function.name;
          if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    if (calls.length) message.tool_calls = calls;
  }
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? -1;
  out.turns.push({ turn, stream, prompt: usage?.prompt_tokens, completion: usage?.completion_tokens,
                   cached, expected_at_least: expected, finish,
                   tool_calls: message.tool_calls?.length ?? 0 });
  if (!usage || !(usage.completion_tokens > 0)) fail(`turn ${turn} was not served`);
  if (cached < expected) fail(`turn ${turn}: cached_tokens ${cached} < ${expected}`);
  if (turn === 3) break;
  // The next turn: this reply as the client got it, then a new question (a tool's result if the
  // model called one).
  expected = Math.floor((usage.prompt_tokens + usage.completion_tokens - 1) / block) * block;
  messages.push(message);
  if (message.tool_calls?.length) {
    for (const c of message.tool_calls) {
      messages.push({ role: "tool", tool_call_id: c.id, content: '{"ok": true}' });
    }
  } else {
    messages.push({ role: "user", content: [{ type: "text", text: `And tomorrow, turn ${turn}?` }] });
  }
}
console.log(JSON.stringify(out));
