import { APIRequestContext, expect, Page, request as playwrightRequest, test } from "@playwright/test";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { baseURL } from "../playwright.config";
import { createActivity, failOnConsoleErrors, LOAD_TOOL, MERCHANT, merchantApi, openHydrated, register, uniqueName } from "./helpers";

/** A new shopper with an API client of its own (its session cookie lives there). */
async function newShopper(): Promise<{ api: APIRequestContext; username: string }> {
  const api = await playwrightRequest.newContext({ baseURL });
  const username = uniqueName("buyer");
  await register(api, username, "buyer-password");
  return { api, username };
}

/** One buy through the API, as a browser makes it: the path, then the buy. */
async function buy(api: APIRequestContext, id: number): Promise<{ status: number; body: any }> {
  const path = await api.get(`/api/activities/${id}/path`);
  expect(path.status(), await path.text()).toBe(200);
  const resp = await api.post(`/api/activities/${id}/buy`, { data: { path: (await path.json()).path, quantity: 1 } });
  return { status: resp.status(), body: await resp.json() };
}

/** A figure of the dashboard's stats panel, as a number. */
async function stat(page: Page, name: string): Promise<number> {
  return Number((await page.getByTestId(`stat-${name}`).textContent())?.replaceAll(",", ""));
}

/** Several figures read from the page at one instant (one refresh, not two). */
async function statsAtOnce(page: Page, names: string[]): Promise<number[]> {
  return page.evaluate(
    (ids) => ids.map((n) => Number(document.querySelector(`[data-testid="stat-${n}"]`)?.textContent?.replaceAll(",", ""))),
    names,
  );
}

/** A `datetime-local` value for `offsetMs` from now, in the page's own time zone. */
async function localInput(page: Page, offsetMs: number): Promise<string> {
  return page.evaluate((offset) => {
    const d = new Date(Date.now() + offset);
    const p = (n: number) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }, offsetMs);
}

test.describe("a merchant in another time zone", () => {
  // Far from the server's UTC: the form must convert local times, not send them as UTC.
  test.use({ timezoneId: "America/New_York" });

  test("signs in, creates a sale through the form, adds stock, pauses and resumes it, watches it sell and downloads the CSV", async ({ page }, testInfo) => {
    const errors = failOnConsoleErrors(page);

    // A visitor is sent to sign in, and comes back to the console after.
    await page.goto("/admin");
    await expect(page).toHaveURL(/\/login\?next=%2Fadmin$/);
    await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
    await page.getByTestId("login-username").fill(MERCHANT.username);
    await page.getByTestId("login-password").fill(MERCHANT.password);
    await page.getByTestId("login-submit").click();
    await expect(page).toHaveURL(/\/admin$/);
    await expect(page.getByTestId("admin-new-activity")).toBeVisible();

    // The form: one invalid field first (sale price above the regular price), its message next to it.
    await page.getByTestId("admin-new-activity").click();
    await expect(page).toHaveURL(/\/admin\/activities\/new$/);
    const form = page.getByTestId("admin-activity-form");
    await expect(page.getByTestId("admin-activity-submit")).toBeEnabled();
    const title = uniqueName("Console phone");
    const startsLocal = await localInput(page, -5_000);
    await form.getByTestId("admin-field-title").fill(title);
    await form.getByTestId("admin-field-description").fill("Made in the admin console.");
    await form.getByTestId("admin-field-price").fill("499.00");
    await form.getByTestId("admin-field-seckill_price").fill("599.00");
    await form.getByTestId("admin-field-starts_at").fill(startsLocal);
    await form.getByTestId("admin-field-ends_at").fill(await localInput(page, 3_600_000));
    await form.getByTestId("admin-field-stock").fill("5");
    // The bot check: the proof of work by default, here without one.
    await expect(form.getByTestId("admin-field-bot_check")).toHaveValue("proof_of_work");
    await form.getByTestId("admin-field-bot_check").selectOption("none");
    await expect(form.getByTestId("admin-field-pow_difficulty")).toBeDisabled();
    await page.getByTestId("admin-activity-submit").click();
    await expect(page.getByTestId("admin-error-seckill_price_cents")).toContainText("cannot be above the regular price");
    await expect(page.getByTestId("admin-error-title")).toHaveText("");
    await expect(page).toHaveURL(/\/admin\/activities\/new$/);
    await testInfo.attach("form with a field error", { body: await page.screenshot({ fullPage: true }), contentType: "image/png" });

    await form.getByTestId("admin-field-seckill_price").fill("99.00");
    await page.getByTestId("admin-activity-submit").click();
    await expect(page).toHaveURL(/\/admin\/activities\/\d+$/);
    const id = Number(page.url().split("/").pop());
    await expect(page.getByTestId("admin-activity-title")).toHaveText(title);

    // What the API stored: the local start converted to UTC (New York is 4 or 5 hours behind).
    const merchant = await merchantApi();
    const created = await (await merchant.get(`/api/admin/activities/${id}`)).json();
    expect(created.title).toBe(title);
    expect([created.price_cents, created.seckill_price_cents, created.total_stock, created.captcha_required, created.bot_check])
      .toEqual([49900, 9900, 5, false, "none"]);
    const expectedStart = await page.evaluate((v) => new Date(v).getTime(), startsLocal);
    expect(Date.parse(created.starts_at)).toBe(expectedStart);
    expect(created.starts_at.slice(11, 19)).not.toBe(startsLocal.slice(11, 19));

    // The dashboard's figures.
    await expect(page.getByTestId("stat-total_stock")).toHaveText("5");
    await expect(page.getByTestId("stat-remaining")).toHaveText("5");

    // Add stock, with a confirmation first; the audit shows who and how many.
    await page.getByTestId("admin-add-stock-input").fill("3");
    await page.getByTestId("admin-add-stock-submit").click();
    await expect(page.getByTestId("admin-add-stock-confirmation")).toContainText("from 5 to 8");
    await page.getByTestId("admin-add-stock-confirm").click();
    await expect(page.getByTestId("admin-add-stock-message")).toContainText("stock is now 8");
    await expect(page.getByTestId("stat-total_stock")).toHaveText("8");
    await expect(page.getByTestId("stat-remaining")).toHaveText("8");
    await expect(page.getByTestId("admin-stock-addition")).toHaveCount(1);
    await expect(page.getByTestId("admin-stock-addition").first()).toContainText(`+3 units by ${MERCHANT.username}`);

    // Pause: buys are refused; resume: they are taken again.
    const first = await newShopper();
    await page.getByTestId("admin-pause-toggle").click();
    await expect(page.getByTestId("admin-pause-state")).toContainText("Paused");
    await expect(page.getByTestId("admin-activity-status")).toHaveText("live · paused");
    const refused = await buy(first.api, id);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("paused");
    await page.getByTestId("admin-pause-toggle").click();
    await expect(page.getByTestId("admin-pause-state")).toContainText("Running");
    expect((await buy(first.api, id)).status).toBe(202);

    // The figures follow buys made through the API.
    const buyers = [first.username];
    for (let i = 0; i < 2; i++) {
      const shopper = await newShopper();
      expect((await buy(shopper.api, id)).status).toBe(202);
      buyers.push(shopper.username);
    }
    await expect(page.getByTestId("stat-remaining")).toHaveText("5");
    await expect(page.getByTestId("stat-confirmed")).toHaveText("3");
    await expect(page.getByTestId("stat-queued")).toHaveText("0");
    await expect(page.getByTestId("admin-orders-total")).toHaveText("3 orders", { timeout: 15_000 });
    await expect(page.getByTestId("admin-order-row")).toHaveCount(3);
    await expect.poll(async () => Number(await page.getByTestId("admin-chart").getAttribute("data-samples"))).toBeGreaterThan(2);

    // The status filter.
    await page.getByTestId("admin-orders-status").selectOption("paid");
    await expect(page.getByTestId("admin-orders-total")).toHaveText("0 orders");
    await page.getByTestId("admin-orders-status").selectOption("confirmed");
    await expect(page.getByTestId("admin-order-row")).toHaveCount(3);

    await testInfo.attach("dashboard", { body: await page.screenshot({ fullPage: true }), contentType: "image/png" });

    // The CSV download holds the three orders.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("admin-csv-download").click()]);
    const csv = readFileSync((await download.path())!, "utf8").trim().split("\n");
    expect(csv).toHaveLength(4);
    for (const name of buyers) expect(csv.filter((line) => line.includes(name))).toHaveLength(1);

    // The list shows the sale with its figures.
    await page.getByRole("link", { name: "← All sales" }).click();
    const row = page.locator(`[data-testid=admin-activity-row][data-id="${id}"]`);
    await expect(row).toContainText(title);
    await expect(row.getByTestId("admin-activity-status")).toHaveText("live");
    await merchant.dispose();
    expect(errors).toEqual([]);
  });
});

test("a shopper is refused the admin pages and the admin API; a visitor is sent to sign in", async ({ page, browser }) => {
  const shopper = await newShopper();
  await page.context().addCookies((await shopper.api.storageState()).cookies);
  for (const path of ["/admin", "/admin/activities/new", "/admin/activities/1"]) {
    const resp = await page.goto(path);
    expect(resp!.status(), path).toBe(403);
    await expect(page.getByTestId("forbidden")).toBeVisible();
  }
  // After hydration, navigating inside the app keeps the rule.
  await openHydrated(page, "/");
  await expect(page.getByTestId("admin-link")).toHaveCount(0);

  const api = shopper.api;
  expect((await api.get("/api/admin/activities")).status()).toBe(403);
  expect((await api.get("/api/admin/orders")).status()).toBe(403);
  const create = await api.post("/api/admin/activities", { data: { title: "Not mine" } });
  expect(create.status()).toBe(403);
  expect((await create.json()).error).toBe("forbidden");

  const visitor = await browser.newContext();
  const visitorPage = await visitor.newPage();
  await visitorPage.goto("/admin/activities/1");
  await expect(visitorPage).toHaveURL(/\/login\?next=%2Fadmin%2Factivities%2F1$/);
  expect((await visitorPage.request.get("/api/admin/activities")).status()).toBe(401);
  await visitor.close();
  await shopper.api.dispose();
});

test("the dashboard stays correct while a crowd buys about 1,000 times a second", async ({ page }) => {
  test.setTimeout(120_000);
  const stock = 1500;
  const id = await createActivity({ startsInSecs: 6, stock, captcha: false });
  await page.context().addCookies((await (await merchantApi()).storageState()).cookies);
  await openHydrated(page, `/admin/activities/${id}`);
  await expect(page.getByTestId("stat-remaining")).toHaveText(stock.toLocaleString("en-US"));

  // The load tool drives 3,000 shoppers at 1,000 a second (one buy each) and checks the invariants.
  const crowd = spawn(
    LOAD_TOOL,
    ["crowd", "--base-url", baseURL, "--activity-id", String(id), "--users", "3000", "--rate", "1000", "--concurrency", "256"],
    { env: process.env, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  crowd.stdout.on("data", (d) => (output += d));
  crowd.stderr.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => crowd.on("close", resolve));

  // While it runs, each refresh of the dashboard (once a second) must show figures that can be
  // true: units only leave the stock, orders only grow, and never more orders than units taken.
  let highestRate = 0;
  let refreshes = 0;
  let code: number | null | undefined;
  exited.then((c) => (code = c));
  let last = { remaining: stock, confirmed: 0, updated: "" };
  while (code === undefined) {
    await expect(page.getByTestId("admin-updated")).not.toHaveText(last.updated);
    const updated = (await page.getByTestId("admin-updated").textContent()) ?? "";
    const [remaining, confirmed, rate] = await statsAtOnce(page, ["remaining", "confirmed", "attempts_per_sec"]);
    expect(remaining).toBeGreaterThanOrEqual(0);
    expect(remaining).toBeLessThanOrEqual(last.remaining);
    expect(confirmed).toBeGreaterThanOrEqual(last.confirmed);
    expect(confirmed).toBeLessThanOrEqual(stock - remaining);
    highestRate = Math.max(highestRate, rate);
    refreshes++;
    last = { remaining, confirmed, updated };
  }
  expect(code, output).toBe(0);
  expect(output).toContain("→ OK");
  const summary = `highest buy attempts/s shown: ${highestRate}; ${refreshes} refreshes checked\n${output}`;
  test.info().annotations.push({ type: "load", description: summary });
  console.log(`dashboard under load: ${summary}`);
  expect(highestRate).toBeGreaterThan(300);

  // Once the crowd is done, the dashboard shows exactly what the database holds.
  await expect(page.getByTestId("stat-remaining")).toHaveText("0");
  await expect(page.getByTestId("stat-confirmed")).toHaveText(stock.toLocaleString("en-US"));
  await expect(page.getByTestId("stat-queued")).toHaveText("0");
  await expect(page.getByTestId("stat-failed")).toHaveText("0");
  const api = await merchantApi();
  const stats = await (await api.get(`/api/admin/activities/${id}/stats`)).json();
  expect([stats.remaining, stats.confirmed, stats.queued]).toEqual([0, stock, 0]);
  const orders = await (await api.get(`/api/admin/orders?activity_id=${id}&limit=1`)).json();
  expect(orders.total).toBe(stock);

  // The orders table pages through them, twenty at a time.
  await expect(page.getByTestId("admin-orders-total")).toHaveText(`${stock.toLocaleString("en-US")} orders`, { timeout: 15_000 });
  await expect(page.getByTestId("admin-order-row")).toHaveCount(20);
  await expect(page.getByTestId("admin-orders-range")).toHaveText(`1–20 of ${stock.toLocaleString("en-US")}`);
  const newest = await page.getByTestId("admin-order-row").first().textContent();
  await expect(page.getByTestId("admin-orders-next")).toHaveText("Older →");
  await page.getByTestId("admin-orders-next").click();
  await expect(page.getByTestId("admin-orders-range")).toHaveText(`21–40 of ${stock.toLocaleString("en-US")}`);
  await expect(page.getByTestId("admin-order-row").first()).not.toHaveText(newest!);
  await page.getByTestId("admin-orders-prev").click();
  await expect(page.getByTestId("admin-orders-range")).toHaveText(`1–20 of ${stock.toLocaleString("en-US")}`);
  await api.dispose();
});

test("the console shows its times in the shop's time zone, a setting of the shop", async ({ page }) => {
  const id = await createActivity({ startsInSecs: 3600 });
  const api = await merchantApi();
  try {
    await page.goto("/admin");
    await expect(page).toHaveURL(/\/login\?next=%2Fadmin$/);
    await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
    await page.getByTestId("login-username").fill(MERCHANT.username);
    await page.getByTestId("login-password").fill(MERCHANT.password);
    await page.getByTestId("login-submit").click();
    await expect(page).toHaveURL(/\/admin$/);
    await page.getByTestId("shop-time-zone-input").fill("Asia/Shanghai");
    await page.getByTestId("shop-time-zone-save").click();
    await expect(page.getByTestId("shop-time-zone")).toHaveText("Asia/Shanghai");
    const row = page.locator(`[data-testid=admin-activity-row][data-id="${id}"]`);
    await expect(row.getByTestId("admin-starts-at")).toContainText("GMT+8");
    // A name no time zone has: the API's message, nothing changed.
    await page.getByTestId("shop-time-zone-input").fill("Mars/Olympus_Mons");
    await page.getByTestId("shop-time-zone-save").click();
    await expect(page.getByTestId("shop-time-zone-message")).toContainText("time_zone");
    await expect(page.getByTestId("shop-time-zone")).toHaveText("Asia/Shanghai");
    // The dashboard too, after a reload (the setting is the shop's, not the page's).
    await openHydrated(page, `/admin/activities/${id}`);
    await expect(page.locator(".dashboard p.muted", { hasText: "→" })).toContainText("GMT+8");
  } finally {
    expect((await api.post("/api/admin/shop", { data: { time_zone: "UTC" } })).status()).toBe(200);
    await api.dispose();
  }
});
