import { expect, Page, test } from "@playwright/test";
import { createActivity, failOnConsoleErrors, openHydrated, openListWith, signUpShopper } from "./helpers";

// A browser whose language is Simplified Chinese (its Accept-Language is zh-CN).
test.use({ locale: "zh-CN" });

/** `cents` as the browser's own Intl writes a US-dollar price in `locale`. */
async function priceIn(page: Page, locale: string, cents: number): Promise<string> {
  return page.evaluate(
    ([l, c]) => new Intl.NumberFormat(l as string, { style: "currency", currency: "USD" }).format((c as number) / 100),
    [locale, cents],
  );
}

test("a shopper buys on the Chinese storefront, its prices and countdown written for zh-CN", async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  const soon = await createActivity({ startsInSecs: 2 * 86_400 + 600, botCheck: "none" });
  const live = await createActivity({ stock: 2, botCheck: "none" });
  await signUpShopper(page);

  // The list, in Chinese; the price as zh-CN writes US dollars.
  const card = await openListWith(page, live);
  await expect(page.locator("html")).toHaveAttribute("lang", "zh-CN");
  await expect(page.locator("h1")).toHaveText("限时秒杀");
  await expect(card.locator(".price .now")).toHaveText(await priceIn(page, "zh-CN", 9900));
  await expect(card.locator(".price .was")).toHaveText(await priceIn(page, "zh-CN", 49900));
  await expect(card.getByTestId("countdown")).toContainText("抢购中——距结束还有");

  // A sale two days away: its countdown in days, its start in the browser's zone, both as zh-CN
  // writes them.
  await openHydrated(page, `/activities/${soon}`);
  await expect(page.getByTestId("countdown")).toHaveText(/^距开始还有 2 天 00:\d{2}:\d{2}$/);
  const startsAt = await page.locator("[data-testid=starts-at] time").getAttribute("datetime");
  const written = await page.evaluate((at) => new Date(at as string).toLocaleString("zh-CN"), startsAt);
  await expect(page.locator("[data-testid=starts-at] time")).toHaveText(written);
  await expect(page.getByTestId("starts-at")).toContainText("开始");

  // The buy, and the order followed to confirmed, in Chinese.
  await openHydrated(page, `/activities/${live}`);
  await expect(page.getByTestId("stock-remaining")).toHaveText("2");
  const buy = page.getByTestId("buy-button");
  await expect(buy).toHaveText("立即抢购");
  await expect(buy).toBeEnabled();
  await buy.click();
  const status = page.getByTestId("order-status");
  await expect(status).toHaveText("已确认");
  await expect(page.getByTestId("pay-deadline")).toHaveText(/^请在 \d{2}:\d{2} 内付款$/);
  await page.getByTestId("pay-button").click();
  await expect(status).toHaveText("已付款");
  expect(errors).toEqual([]);
});

test("the language switch changes the page's language and keeps it after a reload", async ({ page, context }) => {
  const live = await createActivity({ stock: 5, botCheck: "none", title: "Phone 12 (128 GB)" });
  await signUpShopper(page);
  await openHydrated(page, `/activities/${live}`);
  await expect(page.getByTestId("buy-button")).toBeEnabled();
  await expect(page.locator("html")).toHaveAttribute("lang", "zh-CN");
  await expect(page.getByTestId("countdown")).toContainText("抢购中");
  if (process.env.SECKILL_SCREENSHOTS) await page.screenshot({ path: "../docs/storefront-zh-CN.png" });

  // English, from the switch in the header: the same page, in English.
  await page.getByTestId("language-en").click();
  await expect(page).toHaveURL(new RegExp(`/activities/${live}$`));
  await expect(page.locator("html")).toHaveAttribute("lang", "en");
  await expect(page.getByTestId("countdown")).toContainText("On sale — ends in");
  await expect(page.locator(".price .now")).toHaveText(await priceIn(page, "en-US", 9900));
  if (process.env.SECKILL_SCREENSHOTS) {
    await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1);
    await page.screenshot({ path: "../docs/storefront-en.png" });
  }
  const remembered = (await context.cookies()).find((c) => c.name === "lang");
  expect(remembered?.value).toBe("en");
  await page.reload();
  await expect(page.locator("html")).toHaveAttribute("lang", "en");
  await expect(page.getByTestId("buy-button")).toHaveText("Buy now");

  // And back to Chinese, kept as well.
  await page.getByTestId("language-zh-CN").click();
  await expect(page.locator("html")).toHaveAttribute("lang", "zh-CN");
  await openHydrated(page, "/");
  await expect(page.locator("h1")).toHaveText("限时秒杀");
  await expect(page.getByTestId("language-switch")).toContainText("English");
});

test.describe("without scripts", () => {
  test.use({ javaScriptEnabled: false });

  test("the server writes the page in Chinese: no English shows before the app starts", async ({ page }) => {
    const soon = await createActivity({ startsInSecs: 3_600 * 30, botCheck: "none" });
    await page.goto(`/activities/${soon}`);
    await expect(page.locator("html")).toHaveAttribute("lang", "zh-CN");
    await expect(page.getByTestId("countdown")).toHaveText(/^距开始还有 1 天 0\d:\d{2}:\d{2}$/);
    await expect(page.getByTestId("buy-button")).toHaveText("立即抢购");
    await expect(page.locator("body")).not.toContainText("Starts in");
    await expect(page.locator("body")).not.toContainText("Buy now");
  });
});
