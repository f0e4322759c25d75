// LangChain's ChatOpenAI (@langchain/openai) running an agent's conversation with tools against
// `dualpath serve --tool-call-parser hermes` (run by api_clients_test.sh): bindTools, an AI
// message with tool calls, a ToolMessage, content parts, three turns. Every turn is served, and
// turn n+1's cache reads (usage_metadata.input_token_details.cache_read, from cached_tokens)
// cover turn n's prompt and reply, block-rounded down. Prints one JSON line.
import { ChatOpenAI } from "@langchain/openai";
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";

const [baseURL, apiKey, marker] = process.argv.slice(2);
const block = 64;
const fail = (what) => { console.error("FAIL: " + what); process.exitCode = 1; };
const llm = new ChatOpenAI({ model: "tiny", apiKey, configuration: { baseURL }, temperature: 0,
                             maxTokens: 24, maxRetries: 0 });
const weather = {
  type: "function",
  function: { name: "get_weather", description: "The weather in a city today",
              parameters: { type: "object", properties: { city: { type: "string" } },
                            required: ["city"] } },
};
const agent = llm.bindTools([weather]);
const messages = [
  new SystemMessage(`You are a weather agent (${marker}).`),
  new HumanMessage({ content: [{ type: "text", text: "Weather in Lyon, " },
                               { type: "text", text: "and do I need a coat?" }] }),
  new AIMessage({ content: "", tool_calls: [{ id: "call_7", name: "get_weather",
                                              args: { city: "Lyon" } }] }),
  new ToolMessage({ tool_call_id: "call_7", content: '{"temp_c": 9, "wind_kmh": 30}' }),
];
const out = { turns: [] };
let expected = 0;
for (let turn = 1; turn <= 3; ++turn) {
  const reply = await agent.invoke(messages);
  const u = reply.usage_metadata;
  const cached = u?.input_token_details?.cache_read ?? -1;
  out.turns.push({ turn, prompt: u?.input_tokens, completion: u?.output_tokens, cached,
                   expected_at_least: expected, tool_calls: reply.tool_calls?.length ?? 0 });
  if (!u || !(u.output_tokens > 0)) fail(`turn ${turn} was not served`);
  if (cached < expected) fail(`turn ${turn}: cache_read ${cached} < ${expected}`);
  expected = Math.floor((u.input_tokens + u.output_tokens - 1) / block) * block;
  messages.push(reply);
  if (reply.tool_calls?.length) {
    for (const c of reply.tool_calls) messages.push(new ToolMessage({ tool_call_id: c.id, content: "ok" }));
  } else {
    messages.push(new HumanMessage(`And tomorrow, turn ${turn}?`));
  }
}
console.log(JSON.stringify(out));
