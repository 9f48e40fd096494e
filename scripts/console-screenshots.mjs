// make screenshots: the merchant's console (its list of sales, a sale's dashboard with its
// forecast) and a sale's public report, in English and in Simplified Chinese, as PNGs in docs/.
// Runs against a server at BASE whose merchant is MERCHANT_USER / MERCHANT_PASSWORD
// (scripts/console-screenshots.sh starts one); Chromium at CHROMIUM_PATH.
import { chromium, request } from "../e2e/node_modules/@playwright/test/index.mjs";

const base = process.env.BASE;
const merchant = { username: process.env.MERCHANT_USER, password: process.env.MERCHANT_PASSWORD };
const out = process.env.OUT ?? "docs";

async function api(login) {
  const ctx = await request.newContext({ baseURL: base });
  if (login) {
    const resp = await ctx.post("/api/auth/login", { data: login });
    if (resp.status() !== 200) throw new Error(`sign-in: ${resp.status()} ${await resp.text()}`);
  }
  return ctx;
}

async function sale(ctx, title, startsInSecs, durationSecs, stock, extra = {}) {
  const starts = Date.now() + startsInSecs * 1000;
  const resp = await ctx.post("/api/admin/activities", {
    data: {
      title, description: "A phone at a flash price.", price_cents: 49900, seckill_price_cents: 9900,
      starts_at: new Date(starts).toISOString(), ends_at: new Date(starts + durationSecs * 1000).toISOString(),
      stock, per_user_limit: 1, bot_check: "none", payment_window_secs: 600, ...extra,
    },
  });
  if (resp.status() !== 201) throw new Error(`create: ${resp.status()} ${await resp.text()}`);
  return (await resp.json()).id;
}

async function shopper(n) {
  const ctx = await api();
  const username = `shot_${Date.now().toString(36)}_${n}`;
  const resp = await ctx.post("/api/auth/register", { data: { username, password: "shopper-password" } });
  if (resp.status() !== 201) throw new Error(`register: ${resp.status()} ${await resp.text()}`);
  return ctx;
}

async function until(what, check) {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const shop = await api(merchant);
// A sale that sells 3 of its 5 units and ends, for its report.
const ended = await sale(shop, "Flash phone", 2, 8, 5);
const buyers = await Promise.all([0, 1, 2].map(shopper));
await until("the sale's start", async () => (await (await buyers[0].get(`/api/activities/${ended}/path`)).status()) === 200);
for (const b of buyers) {
  const path = (await (await b.get(`/api/activities/${ended}/path`)).json()).path;
  const resp = await b.post(`/api/activities/${ended}/buy`, { data: { path, quantity: 1 } });
  if (resp.status() !== 202) throw new Error(`buy: ${resp.status()} ${await resp.text()}`);
}
// An upcoming sale with reminders, for the dashboard's forecast.
const upcoming = await sale(shop, "Next week's tablet", 7 * 24 * 3600, 3600, 2000);
for (const b of buyers) await b.post(`/api/activities/${upcoming}/reminder`, { data: {} });
await until("the first sale's end", async () => (await (await shop.get(`/activities/${ended}/report`)).status()) === 200);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: ["--no-sandbox"] });
for (const lang of ["en", "zh-CN"]) {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1100, height: 900 }, locale: lang });
  await context.addCookies([
    ...(await shop.storageState()).cookies,
    { name: "lang", value: lang, url: base },
  ]);
  const page = await context.newPage();
  await page.goto("/admin");
  await page.getByTestId("admin-activity-row").first().waitFor();
  await page.screenshot({ path: `${out}/console-${lang}.png`, fullPage: true });
  await page.goto(`/admin/activities/${upcoming}`);
  await page.getByTestId("forecast-reasons").waitFor();
  await page.getByTestId("stat-remaining").filter({ hasNotText: "…" }).waitFor();
  await page.screenshot({ path: `${out}/dashboard-${lang}.png`, fullPage: true });
  await page.goto(`/activities/${ended}/report`);
  await page.screenshot({ path: `${out}/report-${lang}.png`, fullPage: true });
  await context.close();
}
await browser.close();
console.log(`screenshots in ${out}/: console, dashboard and report, en and zh-CN`);
