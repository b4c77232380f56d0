// A client of nb's agent protocol that is not written in Go: it runs an
// agent over a websocket with the ws package, lends it a tool (clock),
// answers the tool call, and prints the frames it saw and the final
// result as one JSON line. AGENT_URL is the run address
// (ws://host:port/agents/NAME/run).
import WebSocket from "ws";

const ws = new WebSocket(process.env.AGENT_URL);
let seq = 0;
const send = (frame) => ws.send(JSON.stringify({ ...frame, seq: ++seq }));
const seen = [];
let lastSeq = 0;
let done = false;

const fail = (msg) => {
  console.error("client: " + msg);
  process.exit(1);
};
setTimeout(() => fail("no final result within 20 s"), 20000).unref();

ws.on("open", () => {
  send({
    type: "run",
    input: 'call clock {"zone":"UTC"}',
    context: { client: "node" },
    chunks: true,
    tools: [
      {
        name: "clock",
        description: "Tells the time in a zone.",
        input_schema: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] },
      },
    ],
  });
});

ws.on("message", (data) => {
  const frame = JSON.parse(data.toString());
  if (frame.seq !== lastSeq + 1) fail(`seq ${frame.seq} after ${lastSeq}`);
  lastSeq = frame.seq;
  seen.push(frame.type);
  switch (frame.type) {
    case "tool_call":
      if (frame.name !== "clock") fail("unexpected tool " + frame.name);
      send({ type: "tool_result", id: frame.id, output: "09:00 in " + frame.input.zone });
      break;
    case "final_result":
      done = true;
      console.log(JSON.stringify({ result: frame.result, context: frame.context, usage: frame.usage, frames: seen }));
      break;
    case "error":
      fail(`error frame ${frame.code}: ${frame.message}`);
  }
});

ws.on("close", (code) => {
  if (!done) fail("closed before the final result, code " + code);
  process.exit(0);
});
ws.on("error", (err) => fail(err.message));
