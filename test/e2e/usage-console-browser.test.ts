/**
 * The console's Usage page in Chromium through the whole stack (issue 31):
 * requests sent with real keys through the gateway are counted, written by
 * its flush, and drawn on the page under the console's strict CSP (no
 * violation reported), at desktop width and at 390 px. Screenshots go to
 * test-output/screenshots/.
 */
import t from 'tap'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { launchBrowser } from '../helpers/browser.js'
import { httpsClient } from '../helpers/https.js'
import { projectRoot } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'

const PASSWORD = 'a long and private passphrase'
const screenshots = join(projectRoot, 'test-output', 'screenshots')

t.test('the Usage page draws what the gateway counted', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const stack = await startStack(t, { gatewayEnv: { USAGE_FLUSH_INTERVAL: '1s' } })
  const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
  const tenants = new TenantStore(stack.db.pool)
  const agency = await tenants.createAgency('Acme Agency')
  const west = await tenants.createSubAccount(agency.id, 'Acme West')
  await tenants.createUser({ email: 'owner@acme.test', password: PASSWORD, agencyId: agency.id, role: 'owner' })
  const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: agency.id }, 'acme automation', 'ctl:ops')
  const westKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'west calls', 'ctl:ops')
  const client = httpsClient(t, stack.gatewayPorts[0]!, stack.cert)
  for (let i = 0; i < 6; i++) t.equal((await client.request('/v1/agents', { headers: { authorization: `Bearer ${westKey.key}` } })).status, 200)
  for (let i = 0; i < 3; i++) t.equal((await client.request('/v1/agents', { headers: { authorization: `Bearer ${agencyKey.key}` } })).status, 403)
  await waitFor(
    async () => {
      const { rows } = await stack.db.pool.query<{ n: number }>('SELECT coalesce(sum(requests), 0)::int AS n FROM usage_minutes WHERE agency_id = $1', [
        agency.id,
      ])
      return rows[0]!.n >= 9
    },
    'the gateway to write its counts',
    30_000,
    100,
  )

  const origin = `https://127.0.0.1:${stack.gatewayPorts[0]!}`
  const context = await launchBrowser(t, { width: 1280, height: 900 })
  const page = await context.newPage()
  const violations: string[] = []
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) violations.push(message.text())
  })
  await page.goto(`${origin}/console/sign-in`)
  await page.getByLabel('Email').fill('owner@acme.test')
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${origin}/console`)
  await page.goto(`${origin}/console/agencies/${agency.id}/keys`)
  await page.getByRole('link', { name: 'Usage' }).click()
  await page.waitForURL(`${origin}/console/agencies/${agency.id}/usage`)

  t.ok(await page.getByRole('heading', { name: 'Usage', level: 1 }).isVisible())
  const chart = page.getByRole('img', { name: 'Requests over time, by outcome' })
  t.ok(await chart.isVisible(), 'the requests chart, named by its heading')
  t.ok((await chart.boundingBox())!.height > 100, 'drawn at a readable size (the stylesheet loaded)')
  t.equal(await page.locator('svg.chart rect.chart-outcome-served').count(), 1, 'one bar segment of served requests')
  t.equal(await page.locator('svg.chart rect.chart-outcome-scope-refused').count(), 1, 'and one of scope refusals')
  // Strings evaluated in the page (this project's TypeScript has no DOM types).
  const servedFill = await page.evaluate<string>("getComputedStyle(document.querySelector('rect.chart-outcome-served')).fill")
  t.equal(servedFill, 'rgb(0, 114, 178)', 'coloured by the stylesheet, not inline')
  t.ok(await page.getByRole('table', { name: 'Requests per interval, by outcome' }).isVisible(), 'the table beside the chart')
  t.ok(await page.getByRole('cell', { name: 'west calls' }).first().isVisible(), 'the busiest keys')
  t.equal(await page.locator('#log-caption + thead + tbody tr').count(), 3, 'the three refusals in the request log')
  await page.screenshot({ path: join(screenshots, 'console-usage-agency.png'), fullPage: true })

  await page.getByLabel('Outcome (request log)').selectOption('scope-refused')
  await page.getByRole('button', { name: 'Show' }).click()
  await page.waitForURL(/outcome=scope-refused/)
  t.equal(await page.locator('#log-caption + thead + tbody tr').count(), 3, 'the filter keeps the scope refusals')

  await page.setViewportSize({ width: 390, height: 844 })
  await page.goto(`${origin}/console/sub-accounts/${west.id}/usage`)
  t.ok(await page.getByRole('img', { name: 'Requests over time, by outcome' }).isVisible())
  const width = await page.evaluate<number>('document.documentElement.scrollWidth')
  t.ok(width <= 390, `nothing wider than the phone's screen (${width} px)`)
  await page.screenshot({ path: join(screenshots, 'console-usage-sub-account-390.png'), fullPage: true })
  t.same(violations, [], 'no Content-Security-Policy violation')
})
