import { test, expect } from "@playwright/test";
import ICAL from "ical.js";
import { createActivity, merchantApi, openHydrated, recordNotifications, signUpShopper, uniqueName } from "./helpers";

// The time before a sale (reminders, its calendar entry, the phase in the server's HTML) and after
// it (its public report).

test("a shopper is reminded of a sale: a calendar entry in UTC, withdrawn, asked again, told at the start", async ({ browser }) => {
  test.setTimeout(60_000);
  const title = uniqueName("Reminded phone");
  const id = await createActivity({ startsInSecs: 15, stock: 3, title });
  const context = await browser.newContext();
  await recordNotifications(context);
  const page = await context.newPage();
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  const api = await merchantApi();
  const reminders = async () => (await (await api.get(`/api/admin/activities/${id}/stats`)).json()).reminders;

  await page.getByTestId("reminder-ask").click();
  await expect(page.getByTestId("reminder-set")).toBeVisible();
  expect(await reminders()).toBe(1);
  await page.getByTestId("reminder-withdraw").click();
  await expect(page.getByTestId("reminder-ask")).toBeEnabled();
  expect(await reminders()).toBe(0);
  await page.getByTestId("reminder-ask").click();
  await expect(page.getByTestId("reminder-set")).toBeVisible();
  // Still there after a reload: the page asks the server.
  await openHydrated(page, `/activities/${id}`);
  await expect(page.getByTestId("reminder-set")).toBeVisible();
  expect(await reminders()).toBe(1);

  // The calendar entry, read by an independent parser: the start in UTC, a link back.
  const activity = await (await page.request.get(`/api/activities/${id}`)).json();
  const href = await page.getByTestId("reminder-ics").getAttribute("href");
  const ics = await page.request.get(href!);
  expect(ics.headers()["content-type"]).toBe("text/calendar; charset=utf-8");
  const event = new ICAL.Event(new ICAL.Component(ICAL.parse(await ics.text())).getFirstSubcomponent("vevent")!);
  expect(event.startDate.zone?.tzid).toBe("UTC");
  expect(event.startDate.toJSDate().getTime()).toBe(Math.floor(Date.parse(activity.starts_at) / 1000) * 1000);
  expect(event.summary).toContain(title);
  expect(event.component.getFirstPropertyValue("url")).toContain(`/activities/${id}`);

  // At the start, with the page open: told.
  await expect.poll(() => page.evaluate(() => (window as any).__notifications), { timeout: 30_000 }).toEqual([`${title} is on sale now`]);
  await expect(page.getByTestId("countdown")).toHaveAttribute("data-phase", "on-sale");
  await api.dispose();
  await context.close();
});

test("without scripts a sold-out sale says so; once it has ended its page links to its report", async ({ browser, page }) => {
  test.setTimeout(60_000);
  const id = await createActivity({ stock: 1, durationSecs: 20, startsInSecs: -2 });
  const noReport = await page.request.get(`/activities/${id}/report`);
  expect(noReport.status()).toBe(404);
  await signUpShopper(page);
  await openHydrated(page, `/activities/${id}`);
  await page.getByTestId("buy-button").click();
  await expect(page.getByTestId("order-status")).toHaveText("confirmed");

  // A browser that runs no script at all: the server's HTML alone says it. (Loaded again until
  // it does: a CDN in front may answer with the page of up to 5 s ago, before the buy.)
  const bare = await browser.newContext({ javaScriptEnabled: false });
  const plain = await bare.newPage();
  const bareText = async (path: string, selector: string) => {
    await plain.goto(path);
    const found = plain.locator(selector);
    return (await found.count()) > 0 ? found.first().textContent() : null;
  };
  await expect.poll(() => bareText(`/activities/${id}`, "[data-testid=countdown]"), { timeout: 15_000 }).toBe("Sold out");
  await expect(plain.getByTestId("stock-remaining")).toHaveText("0");
  await expect(plain.getByTestId("countdown")).toHaveAttribute("data-phase", "sold-out");
  // Its card, with the ended and sold-out ones (the list is grouped and paginated).
  const card = `[data-testid=sale-group][data-group=Over] [data-testid=activity-card]:has(a[href="/activities/${id}"]) [data-testid=countdown]`;
  const onList = async () => {
    for (let n = 1; ; n++) {
      const text = await bareText(`/?page=${n}`, card);
      if (text !== null || (await plain.getByTestId("page-next").count()) === 0) return text;
    }
  };
  await expect.poll(onList, { timeout: 15_000 }).toBe("Sold out");

  // After the end: the link, the report (rendered by the server too).
  await expect.poll(async () => (await page.request.get(`/api/activities/${id}/report`)).status(), { timeout: 30_000 }).toBe(200);
  await openHydrated(page, `/activities/${id}`);
  await page.getByTestId("report-link").click();
  await expect(page.getByTestId("sale-report")).toBeVisible();
  await expect(page.getByTestId("units-sold")).toHaveText("1");
  await expect(page.getByTestId("not-oversold")).toContainText("Nothing was oversold");
  await expect.poll(() => bareText(`/activities/${id}/report`, "[data-testid=attempts-accepted]"), { timeout: 15_000 }).toBe("1");
  await expect(plain.getByTestId("report-plot")).toBeVisible();
  if (process.env.SECKILL_SCREENSHOTS) await page.screenshot({ path: "../docs/report.png", fullPage: true });
  await bare.close();
});
