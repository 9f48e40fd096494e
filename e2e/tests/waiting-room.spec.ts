import { test, expect, Browser, BrowserContext, Page } from "@playwright/test";
import { createHash } from "node:crypto";
import { createLocalJWKSet, jwtVerify } from "jose";
import { createActivity, merchantApi, openHydrated, openListWith, recordNotifications, signUpShopper } from "./helpers";

interface Shopper {
  context: BrowserContext;
  page: Page;
  joined: number;
}

/** Where a shopper stands, asked with their own session. */
async function place(s: Shopper, id: number): Promise<{ state: string; position: number | null; waiting: number }> {
  const resp = await s.page.request.get(`/api/activities/${id}/queue`);
  expect(resp.status()).toBe(200);
  return resp.json();
}

/** A shopper whose browser clock is `skewMs` off, signed in (not on the sale page yet). */
async function shopperWithSkewedClock(browser: Browser, skewMs: number, joined: number): Promise<Shopper> {
  const context = await browser.newContext();
  await context.addInitScript((skew) => {
    const realNow = Date.now.bind(Date);
    Date.now = () => realNow() + skew;
  }, skewMs);
  const page = await context.newPage();
  await signUpShopper(page);
  return { context, page, joined };
}

test("30 shoppers who wait before the start get drawn places, are admitted in that order, and the rest are told it sold out", async ({ browser }) => {
  test.setTimeout(300_000);
  const n = 30;
  const stock = 10;
  // Clocks from eight minutes behind to seven minutes ahead: the page follows the server's clock.
  const shoppers: Shopper[] = [];
  for (let i = 0; i < n; i++) shoppers.push(await shopperWithSkewedClock(browser, ((i * 7919) % 15 - 8) * 60_000, i));
  // One admission a second: the line is read before it moves.
  const created = Date.now();
  const id = await createActivity({ startsInSecs: 100, stock, waitingRoom: true, admitPerSec: 1 });
  const opened = Date.now();
  for (const s of shoppers) {
    await openHydrated(s.page, `/activities/${id}`);
    await expect(s.page.getByTestId("waiting-room")).toHaveAttribute("data-state", "drawing");
    await expect(s.page.getByTestId("buy-button")).toBeDisabled();
  }
  // Everyone joined before the start (else the test's premise failed, not the product).
  expect(Date.now() - opened, "30 pages opened within the lead time").toBeLessThan(95_000);

  // At the start, places are revealed: a permutation of 1..n, not the joining order.
  // (Once the server says so to one of them: a page's own clock may turn a moment before Redis's.)
  // The wait runs to the start, however long opening the pages took, and 30 s past it.
  const untilStart = Math.max(0, created + 100_000 - Date.now());
  await expect(shoppers[0].page.getByTestId("waiting-room")).toHaveAttribute("data-state", /^(waiting|admitted)$/, { timeout: untilStart + 30_000 });
  const places = await Promise.all(shoppers.map((s) => place(s, id)));
  const positionOf = new Map<Shopper, number>();
  // `position` counts from the head of the line, which moves one admission a second while the 30
  // answers come in; the admitted so far (n - waiting, from the same answer) plus it is the place drawn.
  places.forEach((p, i) => {
    expect(["waiting", "admitted"]).toContain(p.state);
    positionOf.set(shoppers[i], p.state === "admitted" ? 0 : n - p.waiting + (p.position as number));
  });
  const byPlace = [...shoppers].sort((a, b) => positionOf.get(a)! - positionOf.get(b)! || a.joined - b.joined);
  const waitingPositions = [...positionOf.values()].filter((p) => p > 0).sort((a, b) => a - b);
  expect(new Set(waitingPositions).size, "distinct places").toBe(waitingPositions.length);
  expect(byPlace.map((s) => s.joined), "places are drawn, not given in joining order").not.toEqual(shoppers.map((s) => s.joined));
  // The page shows the same place the API gives.
  const middle = byPlace[15];
  const before = positionOf.get(middle)!;
  // (The page shows its last poll: it catches up with the API within one poll interval.)
  await expect
    .poll(async () => Number(await middle.page.getByTestId("queue-position").textContent()), { timeout: 15_000 })
    .toBeLessThanOrEqual(before);

  // A shopper who reloads keeps their place (a new arrival would queue behind all 30).
  await openHydrated(middle.page, `/activities/${id}`);
  await expect(middle.page.getByTestId("queue-position")).toHaveText(/^\d+$/);
  const afterReload = Number(await middle.page.getByTestId("queue-position").textContent());
  expect(afterReload).toBeLessThanOrEqual(before);
  expect(afterReload).toBeLessThan(n - 10);

  // Admission follows the places: the first `stock` in place order are admitted, each buys on the page.
  for (const s of byPlace.slice(0, stock)) {
    await expect(s.page.getByTestId("queue-admitted")).toBeVisible({ timeout: 60_000 });
    const button = s.page.getByTestId("buy-button");
    await expect(button).toBeEnabled();
    await button.click();
    await expect(s.page.getByTestId("order-status")).toHaveText(/queued|confirmed/);
  }

  // Everyone still waiting is told it sold out, without a click. The line admitted `admitted`
  // shoppers in all: exactly the first `admitted` places; nobody behind them was let in.
  const merchant = await merchantApi();
  const stats = await (await merchant.get(`/api/admin/activities/${id}/stats`)).json();
  await merchant.dispose();
  expect(stats.remaining).toBe(0);
  const admitted = stats.queue.admitted as number;
  expect(admitted).toBeGreaterThanOrEqual(stock);
  expect(admitted, "some shoppers were still waiting at the sell-out").toBeLessThan(n);
  for (const [i, s] of byPlace.entries()) {
    if (i < stock) continue;
    const room = s.page.getByTestId("waiting-room");
    if (i >= admitted) {
      await expect(room).toHaveAttribute("data-state", "sold_out", { timeout: 30_000 });
      await expect(s.page.getByTestId("queue-sold-out")).toBeVisible();
      await expect(s.page.getByTestId("buy-button")).toBeDisabled();
    } else {
      await expect(room).toHaveAttribute("data-state", /sold_out|admitted/, { timeout: 30_000 });
    }
  }
  for (const s of shoppers) await s.context.close();

  // The merchant's dashboard shows the line: waiting, admitted, the admission rate.
  const office = await browser.newContext();
  const api = await merchantApi();
  await office.addCookies((await api.storageState()).cookies);
  await api.dispose();
  const dashboard = await office.newPage();
  await openHydrated(dashboard, `/admin/activities/${id}`);
  await expect(dashboard.getByTestId("stat-queue-admitted")).toHaveText(String(admitted));
  await expect(dashboard.getByTestId("stat-queue-waiting")).toHaveText(String(n - admitted));
  await expect(dashboard.getByTestId("stat-queue-rate")).toContainText("of 1");
  // Every turn that could still buy was claimed in time (the pages came for it); only turns that
  // came as the last units sold may lapse (their pages saw "sold out" and did not come for them).
  // Admission was never held back.
  const lapsed = Number(await dashboard.getByTestId("stat-queue-lapsed").textContent());
  expect(lapsed).toBeLessThanOrEqual(admitted - stock);
  await expect(dashboard.getByTestId("stat-queue-held")).toHaveText("flowing");
  await office.close();
});

test("a sold-out sale says so on the list and its page without a click, and reopens when units come back", async ({ page }) => {
  const id = await createActivity({ stock: 1, title: `Last unit ${Date.now()}` });
  await signUpShopper(page);
  const path = (await (await page.request.get(`/api/activities/${id}/path`)).json()).path;
  expect((await page.request.post(`/api/activities/${id}/buy`, { data: { path } })).status()).toBe(202);

  const card = await openListWith(page, id);
  await expect(card).toContainText("1 unit");
  await expect(card).not.toContainText("1 units");
  await expect(card.getByTestId("countdown")).toHaveText("Sold out");

  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("countdown")).toHaveText("Sold out");
  await expect(page.getByTestId("sold-out")).toContainText("may come back");
  await expect(page.getByTestId("buy-button")).toBeDisabled();

  // The merchant adds a unit: the open page reopens by itself.
  const merchant = await merchantApi();
  expect((await merchant.post(`/api/admin/activities/${id}/stock`, { data: { add: 1 } })).status()).toBe(200);
  await merchant.dispose();
  await expect(page.getByTestId("countdown")).toContainText("On sale");
  await expect(page.getByTestId("sold-out")).toHaveCount(0);
  await expect(page.getByTestId("buy-button")).toBeEnabled();
});

test("a waiting shopper sees the odds, and a hidden tab stops polling until it is shown again", async ({ browser }) => {
  test.setTimeout(120_000);
  // One unit: two admitted shoppers cover it, so whoever comes third waits at the front.
  const id = await createActivity({ stock: 1, waitingRoom: true, admitPerSec: 1000 });
  const shoppers: Page[] = [];
  for (let i = 0; i < 3; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signUpShopper(page);
    await openHydrated(page, `/activities/${id}`);
    const room = page.getByTestId("waiting-room");
    if (i < 2) await expect(room).toHaveAttribute("data-state", "admitted", { timeout: 20_000 });
    else await expect(room).toHaveAttribute("data-state", "waiting", { timeout: 20_000 });
    shoppers.push(page);
  }
  const waiter = shoppers[2];
  await expect(waiter.getByTestId("queue-position")).toHaveText("1");
  // Two admitted shoppers still buying, ahead of the waiter, for one unit.
  await expect(waiter.getByTestId("queue-odds")).toHaveText("1 unit left: about 1 in 2 of those ahead of you will find one.");

  // The line is asked about while the tab is seen...
  const asked: number[] = [];
  waiter.on("request", (r) => {
    if (/\/api\/activities\/\d+\/(line|queue)$/.test(r.url())) asked.push(Date.now());
  });
  await expect.poll(() => asked.length, { timeout: 10_000 }).toBeGreaterThan(0);
  // ...not while it is hidden (another tab in front)...
  await waiter.evaluate(() => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  const hiddenAt = Date.now();
  // Five seconds hidden (a poll already on its way when the tab hid may go out in the first two).
  await expect
    .poll(() => {
      expect(asked.filter((t) => t > hiddenAt + 2_000), "polls from a hidden tab").toEqual([]);
      return Date.now() - hiddenAt;
    }, { timeout: 10_000 })
    .toBeGreaterThan(5_000);
  // ...and again as soon as it is shown.
  await waiter.evaluate(() => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => false });
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  const shownAt = Date.now();
  await expect.poll(() => asked.filter((t) => t > shownAt).length, { timeout: 5_000 }).toBeGreaterThan(0);
  for (const p of shoppers) await p.context().close();
});

test("the drawing's fingerprint is on the page before the line opens and its seed only after the start", async ({ page, request }) => {
  test.setTimeout(90_000);
  const id = await createActivity({ startsInSecs: 12, stock: 5, waitingRoom: true, admitPerSec: 1000 });
  const activity = await (await request.get(`/api/activities/${id}`)).json();
  const commitment: string = activity.drawing_commitment;
  expect(commitment).toMatch(/^[0-9a-f]{64}$/);
  expect(activity.drawing_seed).toBeUndefined();
  // In the server's HTML itself (no script run): the fingerprint, not the seed.
  const html = await (await request.get(`/activities/${id}`)).text();
  expect(html).toContain(commitment);
  expect(html).toContain('data-testid="drawing-seed-pending"');

  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("waiting-room")).toHaveAttribute("data-state", "drawing");
  await expect(page.getByTestId("drawing-commitment")).toHaveText(commitment);
  await expect(page.getByTestId("drawing-seed")).toHaveCount(0);
  // The join's receipt, signed: the drawing lists the part before the dot.
  await expect(page.getByTestId("drawing-receipt")).toHaveText(/^[0-9a-f]{32}\.[A-Za-z0-9_-]+$/);
  const receipt = ((await page.getByTestId("drawing-receipt").textContent()) ?? "").split(".")[0];

  // After the start the page shows the seed, which hashes to the fingerprint shown before.
  const seed = page.getByTestId("drawing-seed");
  await expect(seed).toHaveText(/^[0-9a-f]{64}$/, { timeout: 40_000 });
  const shown = (await seed.textContent()) ?? "";
  expect(createHash("sha256").update(Buffer.from(shown, "hex")).digest("hex")).toBe(commitment);
  const drawing = await (await request.get(`/api/activities/${id}/drawing`)).json();
  expect(drawing.seed).toBe(shown);
  expect(drawing.places.map((p: { receipt: string }) => p.receipt)).toContain(receipt);
});

test("a pass-through sale lets a shopper straight to the buy button while nobody waits", async ({ page, request }) => {
  test.setTimeout(60_000);
  const id = await createActivity({ stock: 5, waitingRoom: true, admitPerSec: 50, lineMethod: "pass_through" });
  // The admission step has recorded the units (its window needs them).
  await expect.poll(async () => (await (await request.get(`/api/activities/${id}/line`)).json()).units_left, { timeout: 10_000 }).toBe(5);
  await signUpShopper(page);
  const seen: string[] = [];
  page.on("response", async (r) => {
    if (r.url().endsWith(`/api/activities/${id}/queue`)) seen.push((await r.json().catch(() => ({}))).state);
  });
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("waiting-room")).toHaveAttribute("data-state", "admitted", { timeout: 10_000 });
  await expect(page.getByTestId("buy-button")).toBeEnabled();
  await expect(page.getByTestId("queue-position")).toHaveCount(0);
  expect(seen[0], "the join itself admitted the shopper").toBe("admitted");
  expect(seen).not.toContain("waiting");
});

test("an admission ticket is verified with the published keys by an independent JWT library", async ({ page, request }) => {
  test.setTimeout(60_000);
  const id = await createActivity({ stock: 5, waitingRoom: true, admitPerSec: 1000 });
  const other = await createActivity({ stock: 5, waitingRoom: true, admitPerSec: 1000 });
  await signUpShopper(page);
  const me = await (await page.request.get("/api/me")).json();
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("waiting-room")).toHaveAttribute("data-state", "admitted", { timeout: 20_000 });
  const status = await (await page.request.get(`/api/activities/${id}/queue`)).json();
  const ticket: string = status.ticket;

  const resp = await request.get("/.well-known/jwks.json");
  expect(resp.headers()["cache-control"]).toBe("public, max-age=60");
  const keys = createLocalJWKSet(await resp.json());
  const { payload, protectedHeader } = await jwtVerify(ticket, keys, { issuer: "seckill", audience: "seckill-buy", algorithms: ["EdDSA"] });
  expect(protectedHeader.alg).toBe("EdDSA");
  expect(payload.sub).toBe(String(me.id));
  expect(payload.sale).toBe(id);
  expect((payload.exp as number) * 1000).toBeGreaterThan(Date.now());
  expect(new Date(status.ticket_expires_at).getTime()).toBeGreaterThanOrEqual((payload.exp as number) * 1000);

  // A ticket whose claims were edited fails the library's check, and the server refuses it on
  // another sale as on its own.
  const [h, p, s] = ticket.split(".");
  const moved = Buffer.from(JSON.stringify({ ...payload, sale: other })).toString("base64url");
  await expect(jwtVerify(`${h}.${moved}.${s}`, keys)).rejects.toThrow();
  const path = (await (await page.request.get(`/api/activities/${other}/path`)).json()).path;
  const buy = await page.request.post(`/api/activities/${other}/buy`, { data: { path, admission: `${h}.${moved}.${s}` } });
  expect(buy.status()).toBe(403);
  expect((await buy.json()).error).toBe("not_admitted");
});

test("a shopper who allowed notifications is told at their turn while the tab is hidden", async ({ browser }) => {
  test.setTimeout(60_000);
  // Paused before its start, by more than the instances keep a sale's row (5 s): at the start
  // every instance knows the pause, and nobody is admitted until the resume.
  const id = await createActivity({ startsInSecs: 8, stock: 5, waitingRoom: true, admitPerSec: 1000 });
  const api = await merchantApi();
  expect((await api.post(`/api/admin/activities/${id}/pause`, { data: {} })).status()).toBe(200);
  const context = await browser.newContext();
  await recordNotifications(context);
  const page = await context.newPage();
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("waiting-room")).toHaveAttribute("data-state", "paused", { timeout: 20_000 });
  await page.getByTestId("queue-notify").click();
  await expect(page.getByTestId("queue-notify")).toBeHidden();
  // Another tab in front: the page keeps following the line, because its turn must be told.
  await page.evaluate(() => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  expect((await api.post(`/api/admin/activities/${id}/resume`, { data: {} })).status()).toBe(200);
  await expect.poll(() => page.evaluate(() => (window as any).__notifications), { timeout: 20_000 }).toEqual(["It is your turn"]);
  await expect(page.getByTestId("queue-admitted")).toBeAttached();
  await api.dispose();
  await context.close();
});
