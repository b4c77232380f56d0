// webchat.mjs drives the gateway's web chat in Debian's chromium: it
// opens the page at NB_URL, sends a message that makes the fake model call
// a tool, and checks that the streamed answer, the tool hint and the
// session list appear; then it opens a new chat and goes back to the first.
// It prints "ok" or throws.
import { chromium } from "playwright-core";

const url = process.env.NB_URL;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url);
  await page.getByText("connected", { exact: true }).waitFor({ timeout: 10000 });
  await page.fill("#input", "please use a tool");
  await page.press("#input", "Enter");
  await page.locator(".msg.user", { hasText: "please use a tool" }).waitFor();
  await page.locator(".tool_hint", { hasText: 'read_file("notes.md")' }).waitFor({ timeout: 10000 });
  await page.locator(".msg.assistant", { hasText: "echo: please use a tool" }).waitFor({ timeout: 10000 });
  if (await page.locator(".msg.progress").count() !== 0) throw new Error("the progress bubble stayed after the answer");
  const first = await page.locator("nav li.current").textContent();
  await page.locator("nav li", { hasText: first }).waitFor();
  // A new chat, then back to the first: its messages are shown again.
  await page.click("#new");
  if (await page.locator(".msg").count() !== 0) throw new Error("a new chat is not empty");
  await page.fill("#input", "second chat");
  await page.press("#input", "Enter");
  await page.locator(".msg.assistant", { hasText: "echo: second chat" }).waitFor({ timeout: 10000 });
  await page.locator("nav li", { hasText: first }).click();
  await page.locator(".msg.assistant", { hasText: "echo: please use a tool" }).waitFor();
  if (errors.length) throw new Error("page errors: " + errors.join("; "));
  console.log("ok");
} finally {
  await browser.close();
}
