// The official OpenAI Node client against `dualpath serve` (run by api_clients_test.sh):
// list models, chat without and with streaming, a second turn with cached tokens, and the
// library's own error classes for 401 and 403. Prints one JSON line of what it saw.
import OpenAI from "openai";

const [baseURL, fullKey, chatOnlyKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: fullKey, maxRetries: 0 });
const out = {};
const fail = (what) => { console.error("FAIL: " + what); process.exitCode = 1; };

const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const question = "Explain, in many words, why a KV cache makes the second turn faster. ".repeat(4);
const first = await client.chat.completions.create({
  model: out.models[0], messages: [{ role: "user", content: question }], max_tokens: 24,
  temperature: 0,
});
out.first_usage = first.usage;
out.first_finish = first.choices[0].finish_reason;
const reply = first.choices[0].message.content;
const second = await client.chat.completions.create({
  model: out.models[0], temperature: 0, max_tokens: 8,
  messages: [{ role: "user", content: question }, { role: "assistant", content: reply },
             { role: "user", content: "And the third?" }],
});
out.second_usage = second.usage;
out.second_path = second.dualpath;
let streamed = "";
let streamUsage = null;
const stream = await client.chat.completions.create({
  model: out.models[0], messages: [{ role: "user", content: question }], max_tokens: 24,
  temperature: 0, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) streamUsage = chunk.usage;
  for (const c of chunk.choices) streamed += c.delta?.content ?? "";
}
out.stream_usage = streamUsage;
out.stream_equals_non_stream = streamed === reply;
try {
  await new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 }).models.list();
  fail("a wrong key was accepted");
} catch (e) {
  out.wrong_key = { class: e.constructor.name, status: e.status };
}
try {
  await new OpenAI({ baseURL, apiKey: chatOnlyKey, maxRetries: 0 }).models.list();
  fail("a key without the models scope listed models");
} catch (e) {
  out.no_scope = { class: e.constructor.name, status: e.status, message: e.error?.message };
}
console.log(JSON.stringify(out));
if (!(out.second_usage.prompt_tokens_details.cached_tokens > 0)) fail("second turn had no hits");
if (!out.stream_equals_non_stream) fail("the stream's text differs from the response's");
if (out.wrong_key?.class !== "AuthenticationError") fail("401 is not an AuthenticationError");
if (out.no_scope?.class !== "PermissionDeniedError") fail("403 is not a PermissionDeniedError");
