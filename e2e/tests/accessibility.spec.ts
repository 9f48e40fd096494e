import AxeBuilder from "@axe-core/playwright";
import { expect, Page, test } from "@playwright/test";
import {
  createActivity,
  failOnConsoleErrors,
  merchantApi,
  MERCHANT,
  OPERATOR,
  openHydrated,
  signUpShopper,
} from "./helpers";

/**
 * WCAG 2.0, 2.1 and 2.2 at levels A and AA, every rule axe-core has for them: none is disabled.
 * A violation fails the test with the rule, its help text and the elements it found.
 */
async function expectAccessible(page: Page, state: string): Promise<void> {
  const results = await new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"])
    .analyze();
  const found = results.violations.map(
    (v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`,
  );
  expect(found, `axe-core on ${state}`).toEqual([]);
  // A scan that looked at nothing proves nothing.
  expect(results.passes.length, `rules that passed on ${state}`).toBeGreaterThan(5);
}

async function signIn(page: Page, who: { username: string; password: string }): Promise<void> {
  const resp = await page.request.post("/api/auth/login", { data: who });
  expect(resp.status()).toBe(200);
}

/** Presses Tab until `testId` has the focus (at most `max` times); fails otherwise. */
async function tabTo(page: Page, testId: string, max = 40): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    if (await page.getByTestId(testId).evaluate((el) => el === document.activeElement).catch(() => false)) return;
  }
  throw new Error(`${testId} never got the focus from the keyboard`);
}

/** The focused element shows where the focus is (an outline or a box shadow of its own). */
async function expectVisibleFocus(page: Page): Promise<void> {
  const style = await page.evaluate(() => {
    const el = document.activeElement as HTMLElement;
    const s = getComputedStyle(el);
    return { outline: s.outlineStyle, width: parseFloat(s.outlineWidth), shadow: s.boxShadow };
  });
  expect(style.outline !== "none" && style.width >= 2 || style.shadow !== "none", JSON.stringify(style)).toBe(true);
}

/** What the storefront says, in each of its languages (as a browser asking for it gets it). */
const SAID = {
  "en-US": {
    startsIn: "Starts in",
    tenMinutes: "The sale starts in less than 10 minutes.",
    onSale: "The sale is on: you can buy now.",
    confirmed: "confirmed",
    paid: "paid",
  },
  "zh-CN": {
    startsIn: "距开始还有",
    tenMinutes: "秒杀将在 10 分钟内开始。",
    onSale: "秒杀进行中：现在可以抢购。",
    confirmed: "已确认",
    paid: "已付款",
  },
};

// The storefront's pages and the keyboard-only buy, in each language.
for (const [locale, said] of Object.entries(SAID)) {
  test.describe(locale, () => {
    test.use({ locale });

    test(`every storefront page in every state passes axe-core (WCAG 2.2 AA), in ${locale}`, async ({ page, browser }) => {
      test.setTimeout(180_000);
      // A missing page (its 404 is logged by the browser, so before the console is watched).
      await openHydrated(page, "/no-such-page");
      await expect(page.locator("html")).toHaveAttribute("lang", locale === "zh-CN" ? "zh-CN" : "en");
      await expectAccessible(page, "a missing page");
      const errors = failOnConsoleErrors(page);
      // A visitor: the list, sign-in and register pages.
      const upcoming = await createActivity({ startsInSecs: 600, botCheck: "proof_of_work", powDifficulty: 1000 });
      for (const path of ["/", "/login", "/register"]) {
        await openHydrated(page, path);
        await expectAccessible(page, path);
      }

      // A shopper: the countdown with the bot check passed in the background.
      await signUpShopper(page);
      await openHydrated(page, `/activities/${upcoming}`);
      await expect(page.getByTestId("countdown")).toContainText(said.startsIn);
      await expect(page.getByTestId("pow-status")).toHaveAttribute("data-ready", "true");
      await expectAccessible(page, "countdown");
      // The ticking text is silent; the live region says the milestone, and not again each second.
      const countdown = page.getByTestId("countdown");
      const announcement = page.getByTestId("countdown-announcement");
      await expect(countdown).toHaveAttribute("aria-live", "off");
      await expect(announcement).toHaveAttribute("aria-live", "polite");
      await expect(announcement).toHaveText(said.tenMinutes);
      const before = await countdown.textContent();
      await expect(countdown).not.toHaveText(before ?? "");
      await expect(announcement).toHaveText(said.tenMinutes);

      // The buy panel, with the proof of work ready.
      const live = await createActivity({ stock: 1, botCheck: "proof_of_work", powDifficulty: 1000 });
      await openHydrated(page, `/activities/${live}`);
      await expect(page.getByTestId("pow-status")).toHaveAttribute("data-ready", "true");
      await expect(page.getByTestId("buy-button")).toBeEnabled();
      await expect(page.getByTestId("countdown-announcement")).toHaveText(said.onSale);
      await expectAccessible(page, "buy panel (proof of work)");

      // The image captcha with its alternative.
      const image = await createActivity({ stock: 3, botCheck: "image", powDifficulty: 1000 });
      await openHydrated(page, `/activities/${image}`);
      await expect(page.getByTestId("captcha-image")).toBeVisible();
      await expectAccessible(page, "buy panel (image captcha)");

      // Queued, then confirmed.
      await openHydrated(page, `/activities/${live}`);
      await expect(page.getByTestId("buy-button")).toBeEnabled();
      await page.getByTestId("buy-button").click();
      await expect(page.getByTestId("order-status")).toBeVisible();
      await expectAccessible(page, "queued");
      await expect(page.getByTestId("order-status")).toHaveText(said.confirmed);
      await expectAccessible(page, "confirmed");

      // Sold out (the one unit is gone), as another shopper sees it.
      const other = await (await browser.newContext({ locale })).newPage();
      await signUpShopper(other);
      await openHydrated(other, `/activities/${live}`);
      await expect(other.getByTestId("sold-out")).toBeVisible();
      await expectAccessible(other, "sold out");

      // A waiting room before the start.
      const room = await createActivity({ startsInSecs: 600, waitingRoom: true });
      await openHydrated(other, `/activities/${room}`);
      await expect(other.getByTestId("waiting-room")).toHaveAttribute("data-state", "drawing");
      await expectAccessible(other, "waiting room");
      await other.context().close();

      // The shopper's orders, one order, the account page.
      await openHydrated(page, "/orders");
      await expect(page.locator("ul.orders li").first()).toBeVisible();
      await expectAccessible(page, "orders");
      const token = (await (await page.request.get("/api/orders")).json()).orders[0].token;
      await openHydrated(page, `/orders/${token}`);
      await expect(page.getByTestId("order-status")).toHaveText(said.confirmed);
      await expectAccessible(page, "order");
      await openHydrated(page, "/account");
      await expectAccessible(page, "account");
      expect(errors).toEqual([]);
    });

    test(`a shopper buys and pays with the keyboard alone, the focus always visible, in ${locale}`, async ({ page }) => {
      const errors = failOnConsoleErrors(page);
      const id = await createActivity({ stock: 2, botCheck: "proof_of_work", powDifficulty: 1000 });
      await signUpShopper(page);
      await openHydrated(page, `/activities/${id}`);
      await expect(page.getByTestId("pow-status")).toHaveAttribute("data-ready", "true");
      await tabTo(page, "buy-button");
      await expectVisibleFocus(page);
      await page.keyboard.press("Enter");
      const status = page.getByTestId("order-status");
      await expect(status).toHaveText(said.confirmed);
      await tabTo(page, "pay-button");
      await expectVisibleFocus(page);
      await page.keyboard.press("Enter");
      await expect(status).toHaveText(said.paid);
      expect(errors).toEqual([]);
    });
  });
}

test("every console page passes axe-core (WCAG 2.2 AA), the live chart with its figures as a table", async ({ page }) => {
  test.setTimeout(120_000);
  const id = await createActivity({ stock: 20, botCheck: "none" });
  await signIn(page, MERCHANT);
  for (const path of ["/admin", "/admin/activities/new", `/admin/activities/${id}`, "/admin/audit"]) {
    await openHydrated(page, path);
    await expectAccessible(page, path);
  }
  // The chart's text alternative: the same figures, as a table.
  await openHydrated(page, `/admin/activities/${id}`);
  const table = page.getByTestId("chart-table");
  await expect(table.locator("tbody tr").first()).toBeVisible({ timeout: 15_000 });
  await expect(table.locator("th").first()).toBeAttached();
  // The form with errors shown.
  await openHydrated(page, "/admin/activities/new");
  await page.getByTestId("admin-activity-submit").click();
  await expect(page.getByTestId("admin-error-title")).not.toHaveText("");
  await expectAccessible(page, "new sale form with errors");

  expect((await page.request.post("/api/auth/logout", { data: {} })).status()).toBe(204);
  await signIn(page, OPERATOR);
  for (const path of ["/operator", "/operator/audit"]) {
    await openHydrated(page, path);
    await expectAccessible(page, path);
  }
});

test("a proof-of-work sale is bought with no puzzle; an image sale's alternative is reached by keyboard", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  // The default check of a new sale: the proof of work, at its default difficulty.
  const api = await merchantApi();
  const starts = Date.now() - 5_000;
  const created = await api.post("/api/admin/activities", {
    data: {
      title: "No puzzle", price_cents: 1000, seckill_price_cents: 100, stock: 3,
      starts_at: new Date(starts).toISOString(), ends_at: new Date(starts + 3_600_000).toISOString(),
    },
  });
  expect(created.status()).toBe(201);
  const sale = await created.json();
  await api.dispose();
  expect(sale.bot_check).toBe("proof_of_work");
  await signUpShopper(page);
  const challenges: string[] = [];
  page.on("request", (r) => { if (r.url().endsWith("/challenge")) challenges.push(r.url()); });
  await openHydrated(page, `/activities/${sale.id}`);
  await expect(page.getByTestId("pow-status")).toHaveAttribute("data-ready", "true", { timeout: 30_000 });
  await expect(page.getByTestId("captcha-image")).toHaveCount(0);
  await expect(page.getByTestId("captcha-input")).toHaveCount(0);
  const buy = page.waitForRequest((r) => r.url().endsWith(`/api/activities/${sale.id}/buy`));
  await page.getByTestId("buy-button").click();
  expect(JSON.parse((await buy).postData() ?? "{}").pow).toBeTruthy();
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  // Bought: no new challenge is fetched (none at the busiest second for a shopper who is done).
  expect(challenges, "challenges fetched").toHaveLength(1);

  // An image sale: the shopper who cannot read it switches to the proof of work from the keyboard.
  const image = await createActivity({ stock: 3, botCheck: "image", powDifficulty: 1000 });
  await openHydrated(page, `/activities/${image}`);
  await expect(page.getByTestId("captcha-image")).toBeVisible();
  await tabTo(page, "use-pow");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("captcha-input")).toHaveCount(0);
  await expect(page.getByTestId("pow-status")).toHaveAttribute("data-ready", "true");
  await tabTo(page, "buy-button");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");
  expect(errors).toEqual([]);
});
