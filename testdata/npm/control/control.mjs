// control.mjs drives the control page of nb serve and nb gateway in
// Debian's chromium: a page of another origin cannot read it, the page
// asks for the token, the login opens it, and the panels show the
// scripted traffic (NB_REQUESTS requests in the last hour, or at least
// NB_REQUESTS_MIN, NB_TOKENS tokens of model NB_MODEL today, the run
// NB_RUN in flight, the error NB_ERROR, a table row NB_TABLE with NB_CELL
// and, in NB_CELLS, a JSON list of [panel, text] pairs each panel shows).
// It takes a screenshot into NB_SHOT when set, and prints "ok" or throws.
import { chromium } from "playwright-core";

const url = process.env.NB_URL;
const want = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

  // Another origin's request is refused, with or without the token.
  const foreign = await context.request.get(url + "/control/api/state", { headers: { Origin: "http://evil.example" } });
  if (foreign.status() !== 403) throw new Error(`a foreign origin got ${foreign.status()}`);
  const anonymous = await context.request.get(url + "/control/api/state");
  if (anonymous.status() !== 401) throw new Error(`no token got ${anonymous.status()}`);

  await page.goto(url + "/control");
  await page.locator("#login").waitFor({ state: "visible", timeout: 10000 });
  if (await page.locator("#panels").isVisible()) throw new Error("the panels show before the login");
  await page.fill("#login input[name=token]", want("NB_TOKEN"));
  await Promise.all([page.waitForNavigation(), page.click("#login button")]);
  if (page.url() !== url + "/control") throw new Error(`after the login: ${page.url()}: ${await page.content()}`);
  if (page.url().includes(want("NB_TOKEN"))) throw new Error("the token is in the address");
  await page.waitForFunction(() => Number(document.body.dataset.loaded || 0) >= 1, null, { timeout: 10000 });

  // The requests plot: 60 points, whose sum is the scripted count (the
  // minute may have turned since).
  const req = page.locator('[data-plot="requests"] polyline[data-series="requests"]');
  const reqValues = (await req.getAttribute("data-values")).split(",").map(Number);
  const reqPoints = (await req.getAttribute("points")).trim().split(/\s+/).length;
  if (reqValues.length !== 60 || reqPoints !== 60) throw new Error(`requests plot has ${reqValues.length} values, ${reqPoints} points`);
  const reqSum = reqValues.reduce((a, b) => a + b, 0);
  if (process.env.NB_REQUESTS_MIN) {
    if (reqSum < Number(process.env.NB_REQUESTS_MIN)) throw new Error(`requests in the last hour: ${reqSum}, want at least ${process.env.NB_REQUESTS_MIN}`);
  } else if (reqSum !== Number(want("NB_REQUESTS"))) throw new Error(`requests in the last hour: ${reqSum}`);
  // The tokens by model plot: 30 days, today's is the scripted tokens.
  const model = page.locator(`[data-plot="by-model"] polyline[data-series="${want("NB_MODEL")}"]`);
  const tok = (await model.getAttribute("data-values")).split(",").map(Number);
  const tokPoints = (await model.getAttribute("points")).trim().split(/\s+/).length;
  if (tok.length !== 30 || tokPoints !== 30) throw new Error(`tokens plot has ${tok.length} values, ${tokPoints} points`);
  if (tok[29] !== Number(want("NB_TOKENS"))) throw new Error(`tokens today: ${tok[29]}`);
  await page.locator('[data-plot="latency"] polyline[data-series="p95"]').waitFor();
  if (process.env.NB_RUN) await page.locator('[data-panel="inflight"] td', { hasText: process.env.NB_RUN }).first().waitFor({ timeout: 10000 });
  await page.locator('[data-panel="errors"] td', { hasText: want("NB_ERROR") }).first().waitFor({ timeout: 10000 });
  if (process.env.NB_TABLE) await page.locator(`[data-panel="${process.env.NB_TABLE}"] td`, { hasText: want("NB_CELL") }).first().waitFor({ timeout: 10000 });
  for (const [panel, text] of JSON.parse(process.env.NB_CELLS || "[]")) {
    await page.locator(`[data-panel="${panel}"] td`, { hasText: text }).first().waitFor({ timeout: 10000 })
      .catch(() => { throw new Error(`panel ${panel} does not show ${JSON.stringify(text)}`); });
  }
  if (process.env.NB_SHOT) await page.screenshot({ path: process.env.NB_SHOT, fullPage: true });
  if (errors.length) throw new Error("page errors: " + errors.join("; "));
  console.log("ok");
} finally {
  await browser.close();
}
