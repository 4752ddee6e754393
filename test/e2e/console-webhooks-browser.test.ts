/**
 * The console's Webhooks page by the rules of issue 34, in Chromium: a double
 * click on Register endpoint or Roll secret makes one endpoint or one roll and
 * shows its secret once; a bad URL with no event gets an error summary that
 * takes focus, with both fields marked; an endpoint whose receiver answers 500
 * stands out as failing with its error; once the receiver is back, Redeliver
 * (double-clicked) sends the event again and it arrives; the delete notice
 * names the endpoint and is gone on reload; the list and the deliveries work
 * at 390 px. The console runs in-process over HTTP on localhost (a secure
 * context to the browser, so its Secure cookies hold), with a real webhook
 * sender and receiver (WEBHOOK_ALLOW_PRIVATE_ADDRESSES' policy, so the
 * receiver may sit on 127.0.0.1). Screenshots go to
 * test-output/screenshots/ (console-webhooks-*).
 */
import t from 'tap'
import { mkdirSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import Fastify from 'fastify'
import type { BrowserContext, Page } from 'playwright-core'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { createLogger } from '@scoped/shared/logger'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { consolePlugin } from '@scoped/agency-service/console/index'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { WebhookSender } from '@scoped/agency-service/webhooks/sender'
import { createWorld, PASSWORD } from '../console/console-harness.js'
import { launchBrowser } from '../helpers/browser.js'
import { createTestDatabase } from '../helpers/database.js'
import { projectRoot } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait-for.js'
import { startWebhookReceiver } from '../helpers/webhook-receiver.js'

const screenshots = join(projectRoot, 'test-output', 'screenshots')
/** The sender never retries on its own within the test: only a redelivery sends a failed event again. */
const NO_RETRY_WITHIN_THE_TEST = { delaysMs: [3_600_000], thenEveryMs: 3_600_000 }

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(screenshots, `console-webhooks-${name}.png`), fullPage: true })
}

async function signIn(context: BrowserContext, origin: string, email: string): Promise<Page> {
  const page = await context.newPage()
  await page.goto(`${origin}/console/sign-in`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${origin}/console`)
  return page
}

t.test('the Webhooks page in Chromium: once-only forms, errors, a failing endpoint, redeliver, notices, 390 px', async (t) => {
  mkdirSync(screenshots, { recursive: true })
  const db = await createTestDatabase(t)
  const pool = db.pool
  const keys = new KeyService(pool, new KeyRevocationNotifier(pool, null))
  const app = Fastify({ logger: false })
  await app.register(errorEnvelopePlugin)
  await app.register(consolePlugin, { prefix: '/console', pool, keys, webhookPolicy: { allowPrivateAddresses: true } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const origin = `http://localhost:${(app.server.address() as AddressInfo).port}`
  const receiver = await startWebhookReceiver(t)
  receiver.answer = () => 500
  const sender = new WebhookSender({
    pool,
    logger: createLogger('agency-service', 'silent'),
    allowPrivateAddresses: true,
    retrySchedule: NO_RETRY_WITHIN_THE_TEST,
    pollMs: 50,
    remindersEveryMs: 3_600_000,
  })
  sender.start()
  t.teardown(() => sender.stop())

  const world = await createWorld(pool, 'Hooks')
  const webhooks = `/console/agencies/${world.agencyId}/webhooks`
  const context = await launchBrowser(t, { width: 1280, height: 900 })
  const page = await signIn(context, origin, world.owner.email)
  const posts: string[] = []
  page.on('request', (request) => {
    if (request.method() === 'POST') posts.push(request.url())
  })
  const endpoints = async () => (await pool.query<{ id: string; secret: string }>('SELECT id, secret FROM webhook_endpoints ORDER BY created_at')).rows

  await t.test('a bad URL and no event: a summary that takes focus, Error: in the title, both fields marked', async (t) => {
    await page.goto(`${origin}${webhooks}`)
    await page.getByLabel('URL', { exact: true }).fill('hooks example com')
    await page.getByRole('button', { name: 'Register endpoint' }).click()
    await page.getByRole('heading', { name: 'There is a problem' }).waitFor()
    t.match(await page.title(), /^Error: Webhooks/)
    t.ok(await page.evaluate(`document.activeElement !== null && document.activeElement.hasAttribute('data-error-summary')`), 'the summary has focus')
    t.same(await page.locator('[data-error-summary] li').allInnerTexts(), ['The URL must be an absolute URL', 'Choose at least one event'])
    const url = page.getByLabel('URL', { exact: true })
    t.equal(await url.getAttribute('aria-invalid'), 'true', 'the URL is marked')
    t.equal(await url.getAttribute('aria-describedby'), 'webhook-url-hint webhook-url-error')
    t.equal(await page.getByRole('group', { name: 'Events' }).getAttribute('aria-invalid'), 'true', 'and the events')
    await screenshot(page, '01-error-summary')
    await page.getByRole('link', { name: 'Choose at least one event' }).click()
    t.ok(await page.evaluate(`document.activeElement && document.activeElement.id === 'event-key-created'`), 'a summary link takes focus to its field')
    t.equal((await endpoints()).length, 0, 'nothing registered')
  })

  await t.test('a double click on Register endpoint makes one endpoint and shows its secret, once', async (t) => {
    await page.getByLabel('URL', { exact: true }).fill(receiver.url)
    await page.getByRole('checkbox', { name: 'key.created' }).check()
    posts.length = 0
    await page.getByRole('button', { name: 'Register endpoint' }).dblclick()
    await page.waitForURL(/\/webhooks\/[0-9a-f-]{36}\/secret$/)
    t.equal(posts.length, 1, 'the second click sent nothing')
    const stored = await endpoints()
    t.equal(stored.length, 1, 'one endpoint')
    t.equal(await page.getByLabel(/^Signing secret of /).inputValue(), stored[0]!.secret, 'the secret shown is the one that signs')
    await screenshot(page, '02-secret-once')
    await page.reload()
    t.ok(await page.getByText('it cannot be shown again').isVisible(), 'a reload says it cannot be shown again')
  })

  await t.test('a double click on Roll secret rolls once and shows the new secret', async (t) => {
    const { id, secret: before } = (await endpoints())[0]!
    await page.goto(`${origin}${webhooks}`)
    await page.locator(`#endpoint-${id} summary`).click()
    await page.getByRole('link', { name: `Roll the secret of ${receiver.url}` }).click()
    posts.length = 0
    await page.getByRole('button', { name: 'Roll secret' }).dblclick()
    await page.waitForURL(/\/secret\?rolled=1$/)
    t.equal(posts.length, 1, 'the second click sent nothing')
    const after = (await endpoints())[0]!.secret
    t.not(after, before, 'rolled')
    t.equal(await page.getByLabel(/^Signing secret of /).inputValue(), after, 'the new secret is shown')
  })

  await t.test('an endpoint whose receiver fails stands out, with its error; Redeliver sends the event again, once', async (t) => {
    const id = (await endpoints())[0]!.id
    await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'reporting', 'test')
    await waitFor(
      async () => (await pool.query(`SELECT 1 FROM webhook_attempts WHERE endpoint_id = $1 AND state = 'failed'`, [id])).rowCount === 1,
      'the failed attempt to be recorded',
    )
    await page.goto(`${origin}${webhooks}`)
    const row = page.locator(`#endpoint-${id}`)
    t.match(await row.innerText(), /Failing/, 'the row says Failing')
    t.match(await row.innerText(), /Last error .*: .*500/, 'with the last error')
    t.ok(await page.locator('#failing-endpoints').getByRole('link', { name: receiver.url }).isVisible(), 'and is named above the list')
    await screenshot(page, '03-failing-1280')

    receiver.answer = () => 200
    await row.locator('summary').click()
    await page.getByRole('link', { name: `Deliveries to ${receiver.url}` }).click()
    t.match(await page.locator('tbody tr').first().innerText(), /key\.created[\s\S]*Failed[\s\S]*answered 500/)
    posts.length = 0
    await page.getByRole('button', { name: /^Redeliver key\.created/ }).dblclick()
    await page.getByText('The key.created event will be sent again in a moment').waitFor()
    t.equal(posts.length, 1, 'the second click sent nothing')
    await waitFor(() => receiver.received.length >= 2 && receiver.received, 'the redelivered event to arrive')
    t.equal(receiver.received[1]!.headers['webhook-id'], receiver.received[0]!.headers['webhook-id'], 'the same event, the same webhook-id')
    await waitFor(
      async () => (await pool.query(`SELECT 1 FROM webhook_attempts WHERE endpoint_id = $1 AND state = 'delivered'`, [id])).rowCount === 1,
      'the delivery to be recorded',
    )
    await page.reload()
    t.equal(await page.getByText('will be sent again').count(), 0, 'the notice is shown once')
    t.match(await page.locator('tbody tr').first().innerText(), /Delivered[\s\S]*HTTP 200/, 'the new attempt is listed')
    t.equal(receiver.received.length, 2, 'sent once more, not twice')
    await page.goto(`${origin}${webhooks}`)
    t.match(await page.locator(`#endpoint-${id}`).innerText(), /Healthy/, 'healthy again')
  })

  await t.test('at 390 px the list and the deliveries stack, nothing scrolls sideways', async (t) => {
    const id = (await endpoints())[0]!.id
    receiver.answer = () => 500
    await keys.create({ scope: 'AGENCY', agencyId: world.agencyId }, 'billing', 'test')
    await waitFor(
      async () => (await pool.query(`SELECT 1 FROM webhook_attempts WHERE endpoint_id = $1 AND state = 'failed'`, [id])).rowCount === 2,
      'a second failed attempt',
    )
    const phone = await launchBrowser(t, { width: 390, height: 844 })
    const small = await signIn(phone, origin, world.admin.email)
    for (const [path, name] of [
      [webhooks, '04-list-390'],
      [`${webhooks}/${id}/deliveries`, '05-deliveries-390'],
    ] as const) {
      await small.goto(`${origin}${path}`)
      const width = Number(await small.evaluate('document.documentElement.scrollWidth'))
      t.ok(width <= 390, `${name}: the page is no wider than the screen (${width} px)`)
      t.equal(await small.evaluate("getComputedStyle(document.querySelector('tbody tr')).display"), 'block', `${name}: rows are stacked cards`)
      await screenshot(small, name)
    }
  })

  await t.test('delete: the notice names the endpoint, once; the stale page leads back', async (t) => {
    const id = (await endpoints())[0]!.id
    await page.goto(`${origin}${webhooks}`)
    await page.locator(`#endpoint-${id} summary`).click()
    await page.getByRole('link', { name: `Delete ${receiver.url}` }).click()
    await page.getByRole('button', { name: 'Delete endpoint' }).click()
    await page.getByText(`Endpoint ${receiver.url} was deleted, with its pending deliveries.`).waitFor()
    await screenshot(page, '06-deleted-notice')
    await page.reload()
    t.equal(await page.getByText('was deleted').count(), 0, 'gone on reload')
    t.equal((await endpoints()).length, 0)
    await page.goto(`${origin}${webhooks}/${id}/delete`)
    await page.getByText('This webhook endpoint no longer exists').waitFor()
    await page.getByRole('link', { name: 'Back to the webhooks of Hooks' }).click()
    await page.waitForURL(`${origin}${webhooks}`)
  })

  await t.test('a member sees why the page is not theirs', async (t) => {
    const other = await launchBrowser(t, { width: 1280, height: 900 })
    const member = await signIn(other, origin, world.member.email)
    await member.goto(`${origin}/console/agencies/${world.agencyId}/keys`)
    await member.getByRole('link', { name: 'Webhooks' }).click()
    t.ok(await member.getByText('Only agency owners and admins can manage the agency’s webhooks').isVisible(), 'the tab leads to why')
    t.ok(await member.getByText('Ask one of them').isVisible(), 'and what to do')
    await screenshot(member, '07-member')
  })
})
