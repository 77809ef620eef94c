// The TypeScript bridge's transforms on the transforms benchmark's inputs, timed the way the
// benchmark times its own rows (median of 15 batches of about 10 ms, after a 60 ms warm-up).
//
// Each transform gets its input in the form the matching component gets it: request and tools
// as JSON text (so parsing them counts), agent output and reply text as strings. Prints one JSON
// object, row name -> microseconds; a row whose transform is missing is left out.
//
// `./omniroute.ts` and `./narration.ts` are written next to this file by the benchmark: they
// re-export the TypeScript bridge's own functions from the checkout it was pointed at.
import fs from "node:fs";
import * as omniroute from "./omniroute.ts";
import { narration } from "./narration.ts";

type Inputs = {
  small: string;
  smallText: string;
  claude: string;
  megabyte: string;
  tools: string;
  toolOutput: string;
  text: string;
  toolInput: string;
};

function measure(op: () => unknown): number {
  let sink: unknown;
  const warmUntil = performance.now() + 60;
  let perBatch = 1;
  while (performance.now() < warmUntil) {
    const started = performance.now();
    for (let i = 0; i < perBatch; i++) sink = op();
    if (performance.now() - started < 10) perBatch *= 2;
  }
  const samples: number[] = [];
  for (let k = 0; k < 15; k++) {
    const started = performance.now();
    for (let i = 0; i < perBatch; i++) sink = op();
    samples.push(((performance.now() - started) * 1000) / perBatch);
  }
  if (sink === Symbol.for("never")) console.error("unreachable");
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

const paths = JSON.parse(fs.readFileSync(process.argv[2], "utf8")) as Inputs;
const input = Object.fromEntries(
  Object.entries(paths).map(([key, path]) => [key, fs.readFileSync(path, "utf8")])
) as Inputs;

// Each transform must succeed on its input before it is timed: a row that measured an error
// path would compare nothing.
const rows: Record<string, number> = {};
for (const [row, request] of [
  ["serializer small", input.small],
  ["serializer claude-code", input.claude],
  ["serializer 1 MB", input.megabyte],
] as const) {
  const prompt = omniroute.serializeAnthropicForDevin(JSON.parse(request));
  if (!prompt.text) throw new Error(`${row}: no trace`);
  rows[row] = measure(() => omniroute.serializeAnthropicForDevin(JSON.parse(request)));
}

const parse = (output: string) => omniroute.parseDevinToolRequest(output, JSON.parse(input.tools));
if (parse(input.toolOutput)?.name !== "Bash") throw new Error("the tool envelope did not parse");
if (parse(input.text) !== null) throw new Error("the text reply did not parse as text");
rows["envelope tool"] = measure(() => parse(input.toolOutput));
rows["envelope text"] = measure(() => parse(input.text));

if (narration) {
  if (narration(input.text)) throw new Error("the text reply was taken for narration");
  rows["narration text"] = measure(() => narration(input.text));
}

const head = {
  id: "msg_0123456789abcdef01234567",
  model: "devin-cli-agentic/swe-1-7",
  inputTokens: 12000,
  outputTokens: 300,
};
rows["sse tool"] = measure(() =>
  omniroute.buildClaudeSseFrames(
    omniroute.buildClaudeToolUseResponse({
      ...head,
      tool: { id: "devin_call_0123456789abcdef", name: "Bash", input: JSON.parse(input.toolInput) },
    })
  )
);
rows["sse text"] = measure(() =>
  omniroute.buildClaudeSseFrames(omniroute.buildClaudeTextResponse({ ...head, text: input.text }))
);

// A turn, as the benchmark's per-turn rows run it: the request serialized, the agent's output
// judged for narration (as the executor does for every output of a request with tools), parsed and
// the reply rendered as an event stream.
const textTurn = (request: string, text: string) => {
  omniroute.serializeAnthropicForDevin(JSON.parse(request));
  if (parse(text) !== null) throw new Error("a text turn's output parsed as a call");
  if (narration) narration(text);
  return omniroute.buildClaudeSseFrames(omniroute.buildClaudeTextResponse({ ...head, text }));
};
const toolTurn = (request: string, output: string) => {
  omniroute.serializeAnthropicForDevin(JSON.parse(request));
  if (narration) narration(output);
  const tool = parse(output);
  if (tool === null) throw new Error("a tool turn's output did not parse");
  return omniroute.buildClaudeSseFrames(omniroute.buildClaudeToolUseResponse({ ...head, tool }));
};
rows["turn small"] = measure(() => textTurn(input.small, input.smallText));
rows["turn claude-code"] = measure(() => toolTurn(input.claude, input.toolOutput));
rows["turn 1 MB"] = measure(() => textTurn(input.megabyte, input.text));

console.log(JSON.stringify(rows));
