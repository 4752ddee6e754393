/**
 * GET /openapi.json and GET /docs through a real gateway replica over HTTPS,
 * without a key: the committed document byte for byte, the reference page and
 * its assets from the gateway itself (rendered in Debian's Chromium, which
 * fetches nothing from anywhere else), compressed as each client asks, cached
 * by strong ETags, `/docs/` as `/docs`, and only exactly these paths: any
 * other method, a neighbouring path or one under /v1 still needs a key. Each
 * client has a budget of document requests; its neighbours and its API calls
 * are not affected by it.
 */
import { readFileSync } from 'node:fs'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { launchBrowser } from '../helpers/browser.js'
import { openApiFile } from '../../scripts/api-document.js'
import { gatewayFixture } from './fixture.js'

/** The page's script and stylesheet addresses, as written in it. */
function assetsOf(page: string): string[] {
  return [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!).filter((source) => source !== 'data:,')
}

/** A raw body (the test client does not decompress), as the coding it came in says. */
function decoded(body: Buffer, coding: string | undefined): Buffer {
  if (coding === 'br') return brotliDecompressSync(body)
  if (coding === 'gzip') return gunzipSync(body)
  return body
}

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
    const sources = assetsOf(page.text)
    t.equal(sources.length, 3, 'a stylesheet and two scripts')
    t.same(
      sources.filter((source) => !/^\/docs\/[a-z-]+\.[A-Za-z0-9_-]{16}\.(css|js)$/.test(source)),
      [],
      'every asset is the gateway’s own, at a path that names its content',
    )
    for (const source of sources) {
      const asset = await client.request(source)
      t.equal(asset.status, 200, `${source} without a key`)
      t.match(asset.headers['content-type'], source.endsWith('.css') ? /^text\/css/ : /^text\/javascript/, `${source} type`)
      t.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable', `${source}: cached for good`)
      t.ok(asset.text.length > 0)
    }
    const bundlePath = sources.find((source) => source.includes('swagger-ui-bundle'))!
    const bundle = await client.request(bundlePath)
    t.equal(bundle.text, readFileSync('node_modules/swagger-ui-dist/swagger-ui-bundle.js', 'utf8'), 'the bundle as the package ships it')
    const head = await client.request(bundlePath, { method: 'HEAD' })
    t.equal(head.status, 200)
    t.equal(head.text, '', 'HEAD: no body')
    t.equal(Number(head.headers['content-length']), Buffer.byteLength(bundle.text), 'HEAD: the length of the body GET sends')
    t.equal((await client.request(bundlePath, { headers: { 'if-none-match': String(bundle.headers['etag']) } })).status, 304, 'cached by its ETag')
    const script = await client.request(sources.find((source) => source.includes('/docs/docs.'))!)
    t.match(script.text, /url: '\/openapi\.json'/)
    t.match(script.text, /supportedSubmitMethods: \[\]/, 'reference only: no requests with a key from the page')
    t.match(script.text, /validatorUrl: null/, 'no call to the public validator')
    t.equal(page.headers['cache-control'], 'public, max-age=60', 'the page: a minute')
    t.equal((await client.request('/openapi.json')).headers['cache-control'], 'public, max-age=60', 'the API description: a minute')
  })

  await t.test('compressed as the client asks, q-values honoured, each coding with its own strong ETag', async (t) => {
    const page = await client.request('/docs')
    const bundlePath = assetsOf(page.text).find((source) => source.includes('swagger-ui-bundle'))!
    const original = readFileSync('node_modules/swagger-ui-dist/swagger-ui-bundle.js')
    const rows: Array<[string | undefined, string | undefined]> = [
      [undefined, undefined],
      ['gzip, deflate, br, zstd', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
      ['gzip;q=0.5, br;q=0.4', 'gzip'],
      ['br;q=0, *', 'gzip'],
      ['*', 'br'],
      ['GZIP', 'gzip'],
      ['identity', undefined],
      ['deflate', undefined],
      ['identity;q=0', undefined],
    ]
    const etags = new Map<string | undefined, string>()
    for (const [accept, coding] of rows) {
      const response = await client.request(bundlePath, { headers: accept === undefined ? {} : { 'accept-encoding': accept } })
      t.equal(response.status, 200, `${accept}: 200`)
      t.equal(response.headers['content-encoding'], coding, `${accept}: ${coding ?? 'as it is'}`)
      t.equal(response.headers['vary'], 'accept-encoding', `${accept}: Vary`)
      t.equal(Number(response.headers['content-length']), response.body.length, `${accept}: its own length`)
      t.ok(decoded(response.body, coding).equals(original), `${accept}: the same bundle once decoded`)
      const etag = String(response.headers['etag'])
      t.match(etag, /^"[A-Za-z0-9_-]+"$/, `${accept}: a strong ETag`)
      if (etags.has(coding)) t.equal(etag, etags.get(coding), `${accept}: the same ETag as the same coding`)
      etags.set(coding, etag)
    }
    t.equal(new Set(etags.values()).size, 3, 'three representations, three ETags')
    const br = await client.request(bundlePath, { headers: { 'accept-encoding': 'br' } })
    t.ok(br.body.length < original.length / 3, `brotli: ${br.body.length} bytes of ${original.length}`)
    const gzipTag = etags.get('gzip')!
    t.equal((await client.request(bundlePath, { headers: { 'accept-encoding': 'gzip', 'if-none-match': gzipTag } })).status, 304, 'its ETag: 304')
    t.equal((await client.request(bundlePath, { headers: { 'accept-encoding': 'gzip', 'if-none-match': `W/${gzipTag}` } })).status, 304, 'compared weakly')
    t.equal((await client.request(bundlePath, { headers: { 'accept-encoding': 'gzip', 'if-none-match': `"x", ${gzipTag}` } })).status, 304, 'one of a list')
    const other = await client.request(bundlePath, { headers: { 'accept-encoding': 'br', 'if-none-match': gzipTag } })
    t.equal(other.status, 200, 'another coding’s ETag: the whole answer')
    t.equal(other.headers['content-encoding'], 'br')
    const document = await client.request('/openapi.json', { headers: { 'accept-encoding': 'br' } })
    t.equal(decoded(document.body, document.headers['content-encoding'] as string).toString(), committed.toString('utf8'), '/openapi.json too')
  })

  await t.test('/docs/ is /docs: a redirect, and the page’s addresses resolve from either', async (t) => {
    const redirect = await client.request('/docs/')
    t.equal(redirect.status, 301)
    t.equal(redirect.headers['location'], '/docs')
    t.equal((await client.request('/docs/', { method: 'HEAD' })).status, 301, 'HEAD too')
    const page = await client.request('/docs')
    for (const base of ['/docs', '/docs/']) {
      for (const source of assetsOf(page.text)) {
        const resolved = new URL(source, `https://localhost${base}`)
        t.equal((await client.request(resolved.pathname)).status, 200, `${source} from ${base}`)
      }
    }
  })

  await t.test('only exactly these paths and methods pass without a key', async (t) => {
    const refused: Array<[string, string]> = [
      ['POST', '/openapi.json'],
      ['PUT', '/docs'],
      ['DELETE', '/docs/swagger-ui.css'],
      ['GET', '/openapi.json/'],
      ['GET', '/docs/swagger-ui-bundle.js'],
      ['GET', '/docs/docs.js'],
      ['POST', '/docs/'],
      ['GET', '/docs/docs/'],
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

  await t.test('each client has a budget of document requests; its neighbours and its API calls are not affected', async (t) => {
    // Loopback as a trusted proxy, so that X-Forwarded-For stands for many clients.
    const limited = await fixture.startReplica({ GATEWAY_DOCUMENT_LIMIT: '4', GATEWAY_TRUSTED_PROXIES: '127.0.0.1' }, { t })
    const key = await fixture.createKey('sub-account', 'documents reader')
    const from = (address: string, path = '/openapi.json', headers: Record<string, string> = {}) =>
      limited.client.request(path, { headers: { 'x-forwarded-for': address, ...headers } })
    const paths = ['/openapi.json', '/docs', '/docs/', '/openapi.json']
    for (const [index, path] of paths.entries()) {
      const response = await from('203.0.113.9', path)
      t.ok([200, 301].includes(response.status), `${path}: served`)
      t.equal(response.headers['ratelimit-policy'], '"documents";q=4;w=60')
      t.match(response.headers['ratelimit'], new RegExp(`^"documents";r=${3 - index};t=\\d+$`), `${path}: ${3 - index} left`)
    }
    const refused = await from('203.0.113.9')
    t.equal(refused.status, 429)
    t.same(refused.json, { success: false, message: errorCatalog.tooManyRequests.message })
    t.match(refused.headers['retry-after'], /^\d+$/, 'Retry-After')
    t.match(refused.headers['ratelimit'], /^"documents";r=0;t=\d+$/, 'RateLimit')
    t.equal((await from('203.0.113.9', '/docs/')).status, 429, 'the redirect is counted too')
    t.equal((await from('198.51.100.7')).status, 200, 'a neighbour is served')
    t.equal((await from('203.0.113.9', '/v1/agents', { authorization: `Bearer ${key.key}` })).status, 200, 'its API calls with a key go on')
    for (let i = 1; i <= 4; i++) t.equal((await from(`2001:db8:1:2::${i}`)).status, 200, `IPv6 2001:db8:1:2::${i}`)
    t.equal((await from('2001:db8:1:2:ffff:ffff:ffff:ffff')).status, 429, 'another address of the same /64 shares its budget')
    t.equal((await from('2001:db8:1:3::1')).status, 200, 'the next /64 has its own')
    const metrics = await (await fetch(`http://127.0.0.1:${limited.ports.admin}/metrics`)).text()
    t.match(metrics, /gateway_throttled_requests_total\{limit="documents"\} 3/)
    t.match(metrics, /gateway_requests_total\{outcome="documents-throttled",scope="none",route="none"\} 3/)
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
    // The address with a trailing slash, as a reader may type it: it lands on /docs.
    await page.goto(`${origin}/docs/`)
    await page.locator('.opblock-summary-path', { hasText: '/v1/agents/{id}' }).first().waitFor({ timeout: 20_000 })
    t.equal(page.url(), `${origin}/docs`, 'at /docs')
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
