// Reads one request's answer with the official Anthropic SDK, twice: streamed, through the
// SDK's own stream accumulator (`messages.stream(...).finalMessage()`), and as JSON
// (`messages.create`). Prints one JSON line: {streamed, json} where each is the message's
// {content, stop_reason} or {error, text} (the error's type and the text accumulated before it).
//
// Arguments: the bridge's base URL, then the request body (JSON). NODE_PATH names the SDK's
// node_modules.
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const Anthropic = require("@anthropic-ai/sdk").default;

const [baseURL, body] = process.argv.slice(2);
const request = JSON.parse(body);
const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0 });

const message = (m) => ({ content: m.content, stop_reason: m.stop_reason });

async function streamed() {
  const stream = client.messages.stream({ ...request, stream: true });
  let text = "";
  stream.on("text", (delta) => {
    text += delta;
  });
  try {
    return message(await stream.finalMessage());
  } catch (error) {
    return { error: error?.error?.error?.type ?? String(error), text };
  }
}

async function json() {
  try {
    return message(await client.messages.create({ ...request, stream: false }));
  } catch (error) {
    return { error: error?.error?.error?.type ?? String(error), text: "" };
  }
}

console.log(JSON.stringify({ streamed: await streamed(), json: await json() }));
