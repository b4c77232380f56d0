// A client of nb serve's pipeline routes written with Node's own fetch
// (undici): it starts §2.13's Review example, reads the run's
// server-sent events as they come, answers each question when its
// InterviewStarted arrives (F, then A), and prints what it saw as JSON.
const base = process.env.NB_URL;
const dot = process.env.NB_DOT;
const answers = ["F", "A"];

const created = await fetch(`${base}/pipelines`, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ dot, cartridge: "coder" }),
});
if (created.status !== 201) throw new Error(`POST /pipelines: ${created.status} ${await created.text()}`);
const { id } = await created.json();

const res = await fetch(`${base}/pipelines/${id}/events`, { headers: { Accept: "text/event-stream" } });
if (res.headers.get("content-type") !== "text/event-stream") throw new Error(`content-type ${res.headers.get("content-type")}`);
const seen = [];
let lastId = 0;
let buf = "";
const decoder = new TextDecoder();
for await (const chunk of res.body) {
  buf += decoder.decode(chunk, { stream: true });
  let cut;
  while ((cut = buf.indexOf("\n\n")) >= 0) {
    const block = buf.slice(0, cut);
    buf = buf.slice(cut + 2);
    let name = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const k = line.slice(0, i), v = line.slice(i + 1).replace(/^ /, "");
      if (k === "event") name = v;
      if (k === "data") data += v;
      if (k === "id") lastId = Number(v);
    }
    if (!data) continue;
    const ev = JSON.parse(data);
    seen.push(name);
    if (name === "InterviewStarted") {
      const qs = await (await fetch(`${base}/pipelines/${id}/questions`)).json();
      const q = qs.questions[0];
      const a = await fetch(`${base}/pipelines/${id}/questions/${q.id}/answer`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ value: answers.shift() }),
      });
      if (a.status !== 200) throw new Error(`answer: ${a.status} ${await a.text()}`);
    }
    if (ev.event !== name) throw new Error(`event ${name} has data ${data}`);
  }
}
const info = await (await fetch(`${base}/pipelines/${id}`)).json();
console.log(JSON.stringify({ events: seen, lastId, status: info.status, completed: info.completed_nodes }));
