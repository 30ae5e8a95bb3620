// Drives the Temporal Web UI served by `tulip dev` in headless Chromium,
// for TestWebUI: argv = chromium path, UI base URL, workflow id, run id,
// screenshot folder. Prints one JSON object of what it saw.
import { chromium } from 'playwright-core';

const [executablePath, ui, wid, rid, out] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath,
  // As root, without the sandbox; no background networking (the machine has
  // no outside network).
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const seen = { list_shows_run: false, activities: [], decoded_argument: false, decoded_message: false,
  query_types: [], log_query: '', current_details: '', run_summary: '', activity_summary: '', screenshots: [] };
const shot = async (page, name) => {
  const path = `${out}/${name}.png`;
  await page.screenshot({ path, fullPage: false });
  seen.screenshots.push(path);
};
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(30000);

  // 1. The workflows list shows the run; open it.
  await page.goto(`${ui}/namespaces/default/workflows`);
  const link = page.getByRole('link', { name: wid }).first();
  await link.waitFor();
  seen.list_shows_run = true;
  await shot(page, 'ui-workflows');
  await link.click();
  await page.waitForURL((u) => u.pathname.includes(`/workflows/${wid}/`));
  await page.goto(`${ui}/namespaces/default/workflows/${wid}/${rid}/history`);

  // 2. The event history: tool activities, their input decrypted through
  // the codec server (the server holds only ciphertext).
  await page.getByText('Mme Tulipe').first().waitFor();
  seen.decoded_message = true;
  await page.getByText('tulip.tool.issue_refund').first().waitFor();
  const text = await page.innerText('body');
  seen.activities = [...new Set(text.match(/tulip\.tool\.[a-z_]+/g) || [])];
  await shot(page, 'ui-run');
  const row = page.locator('tr').filter({ hasText: 'tulip.tool.issue_refund' }).first();
  await row.scrollIntoViewIfNeeded();
  await row.getByText('Activity Task Scheduled').click(); // expands the event
  const details = row.locator('xpath=following-sibling::tr[1]');
  await details.getByText(/ord-4821/).first().waitFor();
  await details.scrollIntoViewIfNeeded();
  seen.decoded_argument = true;
  await shot(page, 'ui-activities');

  // 3. The Queries tab: tulip.log.
  await page.goto(`${ui}/namespaces/default/workflows/${wid}/${rid}/query`);
  await page.getByText('Query Type').first().waitFor();
  // The query types the worker registered, from the UI's own select.
  await page.locator('button:has([data-testid=query-select])').click();
  const names = page.locator('#query-select-select li[role=option] span');
  await names.first().waitFor();
  seen.query_types = (await names.allInnerTexts()).map((s) => s.trim());
  await page.locator('#query-select-select li[role=option]', { has: page.locator('span', { hasText: /^tulip\.log$/ }) }).click();
  await page.getByRole('button', { name: 'Run Query' }).click();
  const result = page.locator('pre, code, .cm-content').filter({ hasText: 'ord-4821' }).first();
  await result.waitFor();
  seen.log_query = await result.innerText();
  await shot(page, 'ui-query');

  // 4. User metadata, which adds no events: the run's current details (a
  // markdown table of its calls: served ones and near misses marked) and
  // each tool activity's summary (tool and key), both rendered in frames
  // and decrypted through the codec server.
  const inFrames = async (want) => {
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      for (const f of page.frames()) {
        const t = await f.innerText('body').catch(() => '');
        if (t.includes(want)) return t;
      }
      await page.waitForTimeout(250);
    }
    return '';
  };
  await page.goto(`${ui}/namespaces/default/workflows/${wid}/${rid}/user-metadata`);
  seen.current_details = await inFrames('served from the log');
  seen.run_summary = await inFrames('tulip agent');
  await shot(page, 'ui-current-details');
  await page.goto(`${ui}/namespaces/default/workflows/${wid}/${rid}/history`);
  const toolRow = page.locator('tr').filter({ hasText: 'tulip.tool.issue_refund' }).first();
  await toolRow.waitFor();
  await toolRow.scrollIntoViewIfNeeded();
  seen.activity_summary = await inFrames('issue_refund · ');
  await shot(page, 'ui-summary');
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
