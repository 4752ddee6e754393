import t from 'tap'
import { escapeHtml, html, SafeHtml } from '@scoped/agency-service/console/html'
import { ConsoleClient, createWorld, signedIn, startConsole } from './console-harness.js'

t.test('escapeHtml escapes every character that could end text or an attribute', async (t) => {
  const rows: Array<[string, string]> = [
    ['plain', 'plain'],
    ['<script>', '&lt;script&gt;'],
    ['a & b', 'a &amp; b'],
    ['"double"', '&quot;double&quot;'],
    ["'single'", '&#39;single&#39;'],
    ['&amp;', '&amp;amp;'],
    ['" onmouseover="x', '&quot; onmouseover=&quot;x'],
    ['', ''],
  ]
  for (const [input, expected] of rows) t.equal(escapeHtml(input), expected, JSON.stringify(input))
})

t.test('html escapes interpolated text but keeps nested html, lists, numbers, and renders nothing for false/null/undefined', async (t) => {
  const name = '<b>x</b>'
  t.equal(html`<p>${name}</p>`.toString(), '<p>&lt;b&gt;x&lt;/b&gt;</p>')
  t.equal(html`<p>${html`<i>${name}</i>`}</p>`.toString(), '<p><i>&lt;b&gt;x&lt;/b&gt;</i></p>')
  t.equal(html`<ul>${['a<', 'b>'].map((item) => html`<li>${item}</li>`)}</ul>`.toString(), '<ul><li>a&lt;</li><li>b&gt;</li></ul>')
  t.equal(html`${25} of ${0}`.toString(), '25 of 0')
  t.equal(html`[${false}${null}${undefined}]`.toString(), '[]')
  t.equal(html`<input value="${'" autofocus onfocus="alert(1)'}">`.toString(), '<input value="&quot; autofocus onfocus=&quot;alert(1)">')
  t.throws(() => new SafeHtml('<script>', Symbol('SafeHtml')), 'a raw string cannot be passed off as safe markup')
})

t.test('every console response carries the security headers; pages are never cached', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const responses = {
    'sign-in page': await new ConsoleClient(app).get('/console/sign-in'),
    home: await owner.get('/console'),
    'keys page': await owner.get(`/console/agencies/${world.agencyId}/keys`),
    'not found page': await owner.get('/console/no-such-page'),
    'not found key area': await owner.get('/console/agencies/not-a-uuid/keys'),
  }
  for (const [what, response] of Object.entries(responses)) {
    const csp = String(response.headers['content-security-policy'])
    t.match(csp, "default-src 'none'", what)
    t.match(csp, "script-src 'self'", what)
    t.notMatch(csp, 'unsafe-inline', `${what}: no inline script or style`)
    t.match(csp, "frame-ancestors 'none'", what)
    t.match(csp, "form-action 'self'", what)
    t.equal(response.headers['x-frame-options'], 'DENY', what)
    t.equal(response.headers['x-content-type-options'], 'nosniff', what)
    t.equal(response.headers['referrer-policy'], 'no-referrer', what)
    t.equal(response.headers['cache-control'], 'no-store', what)
    t.match(response.headers['content-type'], /^text\/html; charset=utf-8/, what)
    t.notMatch(response.body, /<script>|<style>| on[a-z]+="|style="/, `${what}: no inline script, style or handler`)
  }
  t.equal(responses['not found page'].statusCode, 404)
  t.equal(responses['not found key area'].statusCode, 404)
})

t.test('pages are accessible: language, labels, a skip link, headings, and the assets they load', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const page = await owner.get(`/console/agencies/${world.agencyId}/keys`)
  t.match(page.body, '<html lang="en">')
  t.match(page.body, '<a class="skip-link" href="#main">')
  t.match(page.body, '<main id="main"')
  t.match(page.body, '<h1>API keys</h1>')
  t.match(page.body, '<nav class="breadcrumbs" aria-label="Breadcrumb">')
  t.match(page.body, '<label for="key-name">Key name</label>')
  t.match(page.body, 'aria-describedby="key-name-hint"')

  const css = await owner.get('/console/assets/console.css')
  t.equal(css.statusCode, 200)
  t.match(css.headers['content-type'], /^text\/css/)
  t.match(css.body, ':focus-visible', 'a visible focus ring')
  const js = await owner.get('/console/assets/console.js')
  t.equal(js.statusCode, 200)
  t.match(js.headers['content-type'], /^text\/javascript/)
  t.match(js.body, 'navigator.clipboard.writeText')
  t.equal(js.headers['cache-control'], 'no-cache')
  const cached = await app.inject({ method: 'GET', url: '/console/assets/console.js', headers: { 'if-none-match': String(js.headers.etag) } })
  t.equal(cached.statusCode, 304, 'revalidated by ETag')
})

t.test('the console lives under /console only', async (t) => {
  const { app } = await startConsole(t)
  for (const path of ['/v1/console/sign-in', '/sign-in', '/consolex/sign-in']) {
    t.equal((await app.inject({ method: 'GET', url: path })).statusCode, 404, path)
  }
})
