/**
 * GET /openapi.json and GET /docs through a real gateway replica over HTTPS,
 * without a key: the committed document byte for byte, the reference page and
 * its assets from the gateway itself (rendered in Debian's Chromium, which
 * fetches nothing from anywhere else), and only exactly these paths: any other
 * method, a neighbouring path or one under /v1 still needs a key.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { launchBrowser } from '../helpers/browser.js'
import { openApiFile } from '../../scripts/api-document.js'
import { gatewayFixture } from './fixture.js'

t.test('the documents, without a key', async (t) => {
  const fixture = await gatewayFixture(t, { redis: false })
  const replica = await fixture.startReplica()
  const { client } = replica
  const committed = readFileSync(openApiFile)

  await t.test('GET /openapi.json: the committed document', async (t) => {
    const response = await client.request('/openapi.json')
    t.equal(response.status, 200)
    t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    t.equal(response.text, committed.toString('utf8'), 'deploy/openapi.json as it is')
    t.equal(response.json.openapi, '3.1.0')
    t.equal(response.headers['access-control-allow-origin'], '*', 'public: any origin may read it')
    t.ok(response.headers['strict-transport-security'], 'HSTS like every answer')
    t.equal(response.headers['www-authenticate'], undefined, 'no key asked for')
    t.ok(response.headers['x-request-id'])
    const etag = String(response.headers['etag'])
    t.equal((await client.request('/openapi.json', { headers: { 'if-none-match': etag } })).status, 304, 'revalidated by its ETag')
    t.equal((await client.request('/openapi.json?download=1')).status, 200, 'a query changes nothing')
    const head = await client.request('/openapi.json', { method: 'HEAD' })
    t.equal(head.status, 200)
    t.equal(head.text, '')
    // A key makes no difference, even a wrong one: the document is public.
    t.equal((await client.request('/openapi.json', { headers: { 'x-api-key': 'not a key' } })).status, 200)
  })

  await t.test('GET /docs: the reference page, its assets from the gateway', async (t) => {
    const page = await client.request('/docs')
    t.equal(page.status, 200)
    t.match(page.headers['content-type'], /^text\/html/)
    const policy = String(page.headers['content-security-policy'])
    t.match(policy, /default-src 'none'/)
    t.match(policy, /script-src 'self';/)
    t.match(policy, /connect-src 'self';/)
    t.equal(page.headers['x-frame-options'], 'DENY')
    const sources = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!)
    t.same(
      sources.filter((source) => !source.startsWith('/docs/') && source !== 'data:,'),
      [],
      'every asset is the gateway’s own',
    )
    for (const source of sources.filter((source) => source.startsWith('/docs/'))) {
      const asset = await client.request(source)
      t.equal(asset.status, 200, `${source} without a key`)
      t.match(asset.headers['content-type'], source.endsWith('.css') ? /^text\/css/ : /^text\/javascript/, `${source} type`)
      t.ok(asset.text.length > 0)
    }
    const bundle = await client.request('/docs/swagger-ui-bundle.js')
    const head = await client.request('/docs/swagger-ui-bundle.js', { method: 'HEAD' })
    t.equal(head.status, 200)
    t.equal(head.text, '', 'HEAD: no body')
    t.equal(Number(head.headers['content-length']), Buffer.byteLength(bundle.text), 'HEAD: the length of the body GET sends')
    t.equal(
      (await client.request('/docs/swagger-ui-bundle.js', { headers: { 'if-none-match': String(bundle.headers['etag']) } })).status,
      304,
      'cached by its ETag',
    )
    const script = await client.request('/docs/docs.js')
    t.match(script.text, /url: '\/openapi\.json'/)
    t.match(script.text, /supportedSubmitMethods: \[\]/, 'reference only: no requests with a key from the page')
    t.match(script.text, /validatorUrl: null/, 'no call to the public validator')
  })

  await t.test('only exactly these paths and methods pass without a key', async (t) => {
    const refused: Array<[string, string]> = [
      ['POST', '/openapi.json'],
      ['PUT', '/docs'],
      ['DELETE', '/docs/swagger-ui.css'],
      ['GET', '/openapi.json/'],
      ['GET', '/docs/'],
      ['GET', '/docs/index.html'],
      ['GET', '/docs/swagger-ui-bundle.js.map'],
      ['GET', '/docs/../v1/agents'],
      ['GET', '/OPENAPI.JSON'],
      ['GET', '/v1/openapi.json'],
      ['GET', '/v1/docs'],
      ['GET', '/openapi.yaml'],
    ]
    for (const [method, path] of refused) {
      const response = await client.request(path, { method: method as 'GET' })
      t.ok([400, 401].includes(response.status), `${method} ${path}: ${response.status}, not served`)
      t.same(Object.keys(response.json ?? {}).sort(), ['message', 'success'], `${method} ${path}: the envelope`)
    }
    // An escaped letter is the same canonical path; whatever the router makes of it, it is never a 5xx nor forwarded.
    const escaped = await client.request('/d%6Fcs')
    t.ok([200, 401].includes(escaped.status), `/d%6Fcs: ${escaped.status}`)
  })

  await t.test('counted as documents', async (t) => {
    const metrics = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
    t.match(metrics, /gateway_requests_total\{outcome="document",scope="none",route="none"\} [1-9]\d*/)
  })

  await t.test('rendered in Chromium, from this origin only', async (t) => {
    const context = await launchBrowser(t)
    const origin = `https://127.0.0.1:${replica.ports.api}`
    const requested: string[] = []
    const problems: string[] = []
    const page = await context.newPage()
    page.on('request', (request) => requested.push(request.url()))
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text())
    })
    page.on('pageerror', (error) => problems.push(error.message))
    await page.goto(`${origin}/docs`)
    await page.locator('.opblock-summary-path', { hasText: '/v1/agents/{id}' }).first().waitFor({ timeout: 20_000 })
    t.ok(await page.getByText('Scoped agency API').first().isVisible(), 'the title')
    t.ok((await page.locator('.opblock').count()) >= 20, 'the operations are listed')
    t.same(
      requested.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:')),
      [],
      'nothing fetched from anywhere but the gateway',
    )
    t.ok(requested.includes(`${origin}/openapi.json`), 'the page read /openapi.json')
    t.same(problems, [], 'no script error and no Content-Security-Policy violation')
  })
})
