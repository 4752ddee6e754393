/**
 * The error contract, pinned as fastify's test/internals/errors.test.js pins
 * its catalog: the catalog (shared/src/errors.ts) is counted and checked
 * against docs/errors.md both ways, every gateway refusal (outcomes.ts, sent
 * by respond.ts) is a documented entry and is sent as documented, and every
 * message the README's error table, docs/spec/contract.md and the spec name
 * is in the catalog with the same status.
 */
import { readdirSync, readFileSync } from 'node:fs'
import Fastify from 'fastify'
import t from 'tap'
import { ApiError, errorCatalog, UNAVAILABLE_RETRY_AFTER_SECONDS } from '@scoped/shared/errors'
import { errorEnvelopePlugin, sendError } from '@scoped/shared/error-envelope-plugin'
import type { ErrorCode } from '@scoped/shared/errors'
import { refusals } from '@scoped/gateway/outcomes'
import type { Refusal } from '@scoped/gateway/outcomes'
import { refuse, refuseRaw, WWW_AUTHENTICATE } from '@scoped/gateway/respond'

interface Row {
  status: number
  message: string
}

const entries = Object.entries(errorCatalog) as Array<[ErrorCode, Row]>

/**
 * Entries whose own text is only a fallback: every use gives a message of its
 * own (docs/errors.md, "Messages that name the problem"), so the catalog's
 * text never reaches a client and is not in the table. The source check below
 * fails as soon as one of them is sent with the catalog's text.
 */
const STATUS_ONLY: ReadonlySet<ErrorCode> = new Set(['forbidden', 'conflict'])

/**
 * Messages of the contract's "Additions, second round" that are not built
 * yet. Whoever builds one adds it to the catalog and to docs/errors.md, and
 * removes it from here: the test fails while it is both here and in the catalog.
 */
const UNBUILT_CONTRACT_MESSAGES: ReadonlySet<string> = new Set([])

function read(path: string): string {
  return readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')
}

/** The rows of every Markdown table in `text` (between `from` and `to` when given) with an error status cell and a `message` cell. */
function tableRows(text: string, from?: string, to?: string): Row[] {
  const start = from === undefined ? 0 : text.indexOf(from)
  const end = to === undefined ? text.length : text.indexOf(to, start)
  const rows: Row[] = []
  for (const line of text.slice(start, end).split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim())
    const status = cells.find((cell) => /^[45]\d\d$/.test(cell))
    const message = cells.map((cell) => /^`([^`]+)`$/.exec(cell)?.[1]).find((found) => found !== undefined)
    if (status !== undefined && message !== undefined) rows.push({ status: Number(status), message })
  }
  return rows
}

/** Messages written inline as an error status and a code span: "gets 401 `Invalid or revoked API key`". */
function inlineRows(text: string): Row[] {
  const prose = text.replace(/\s+/g, ' ')
  return [...prose.matchAll(/\b([45]\d\d) `([^`]+)`/g)].map((match) => ({ status: Number(match[1]), message: match[2]! }))
}

function catalogEntry(message: string): [ErrorCode, Row] | undefined {
  return entries.find(([, entry]) => entry.message === message)
}

const errorsPage = read('docs/errors.md')
const documented = tableRows(errorsPage, '## Every message of the catalog', '## Messages that name the problem')

t.test('the catalog: every entry is documented in docs/errors.md with its status, and nothing else is', async (t) => {
  t.equal(entries.length, 37, 'the catalog holds 37 entries: a new one is documented here and in docs/errors.md')
  t.equal(documented.length + STATUS_ONLY.size, entries.length, 'one row per entry, but the status-only ones')
  for (const [code, entry] of entries) {
    const row = documented.find((candidate) => candidate.message === entry.message)
    if (STATUS_ONLY.has(code)) t.equal(row, undefined, `${code}: its text is never sent, so it is not a row`)
    else t.same(row, entry, `${code}: ${entry.status} ${entry.message}`)
  }
  for (const row of documented) t.same(catalogEntry(row.message)?.[1], row, `documented ${row.status} ${row.message} is in the catalog`)
  t.equal(new Set(entries.map(([, entry]) => entry.message)).size, entries.length, 'no two entries share a message')
})

t.test('a status-only entry is never sent with the catalog text', async (t) => {
  const files = ['shared/src', 'gateway/src', 'agency-service/src', 'resource-service/src']
  const sources = files.flatMap((dir) =>
    (readdirSync(new URL(`../../${dir}`, import.meta.url), { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts'))
      .map((file) => [`${dir}/${file}`, read(`${dir}/${file}`)] as const),
  )
  t.ok(sources.length > 50, 'the sources were read')
  for (const code of STATUS_ONLY) {
    const bare = new RegExp(`new ApiError\\('${code}'\\)|errorCatalog\\.${code}\\.message|errorCatalog\\['${code}'\\]`)
    t.same(
      sources.filter(([, text]) => bare.test(text)).map(([file]) => file),
      [],
      `${code} is always given a message of its own`,
    )
  }
})

t.test('every gateway refusal is a catalog entry, documented, and respond.ts sends exactly that', async (t) => {
  const app = Fastify()
  app.get<{ Params: { outcome: Refusal } }>('/:outcome', (request, reply) => refuse(request, reply, request.params.outcome))
  // The same refusal written to Node's response, as the forwarder does once it has taken the reply over.
  app.get<{ Params: { outcome: Refusal } }>('/raw/:outcome', (request, reply) => {
    reply.hijack()
    refuseRaw(request, reply, request.params.outcome)
  })
  t.teardown(() => app.close())
  for (const [outcome, entry] of Object.entries(refusals) as Array<[Refusal, Row]>) {
    t.ok(
      entries.some(([, candidate]) => candidate === entry),
      `${outcome} answers a catalog entry`,
    )
    t.same(
      documented.find((row) => row.message === entry.message),
      { status: entry.status, message: entry.message },
      `${outcome} is documented`,
    )
    const response = await app.inject({ method: 'GET', url: `/${outcome}` })
    t.equal(response.statusCode, entry.status, `${outcome}: the status`)
    t.same(response.json(), { success: false, message: entry.message }, `${outcome}: the envelope, exactly`)
    t.match(response.headers['content-type'], /^application\/json/, `${outcome}: JSON`)
    if (entry.status === 401) t.equal(response.headers['www-authenticate'], WWW_AUTHENTICATE, `${outcome}: names the scheme`)
    const raw = await app.inject({ method: 'GET', url: `/raw/${outcome}` })
    t.same([raw.statusCode, raw.json()], [entry.status, { success: false, message: entry.message }], `${outcome}: the same when written raw`)
    if (entry.status === 503) {
      const retryAfter = String(UNAVAILABLE_RETRY_AFTER_SECONDS)
      t.same([response.headers['retry-after'], raw.headers['retry-after']], [retryAfter, retryAfter], `${outcome}: says when to retry, both ways`)
    }
  }
})

t.test('every 503 says when to retry: the services’ errors and their own refusals too', async (t) => {
  const app = Fastify()
  await app.register(errorEnvelopePlugin)
  const unavailable = entries.filter(([, entry]) => entry.status === 503).map(([code]) => code)
  t.ok(unavailable.length >= 3, 'the catalog’s 503s')
  app.get<{ Params: { code: ErrorCode } }>('/thrown/:code', async (request) => {
    throw new ApiError(request.params.code)
  })
  app.get('/named', async () => {
    throw new ApiError('serviceUnavailable', 'The key was revoked, but not every gateway replica confirmed dropping it')
  })
  app.get('/sent', (_request, reply) => sendError(reply, 503, errorCatalog.serviceUnavailable.message))
  app.get('/own', (_request, reply) => sendError(reply.header('retry-after', '30'), 503, errorCatalog.serviceUnavailable.message))
  t.teardown(() => app.close())
  const retryAfter = async (url: string): Promise<unknown> => (await app.inject({ method: 'GET', url })).headers['retry-after']
  for (const code of unavailable) t.equal(await retryAfter(`/thrown/${code}`), String(UNAVAILABLE_RETRY_AFTER_SECONDS), `${code}, thrown`)
  t.equal(await retryAfter('/named'), String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'a 503 with a message of its own')
  t.equal(await retryAfter('/sent'), String(UNAVAILABLE_RETRY_AFTER_SECONDS), 'a 503 sent directly')
  t.equal(await retryAfter('/own'), '30', 'a more precise Retry-After set before stays')
  t.equal(await retryAfter('/thrown/badRequest'), undefined, 'and nothing else gets one')
})

t.test('the README: every row of its error table is in the catalog with the same status, and it points to the rest', async (t) => {
  const readme = read('README.md')
  const rows = tableRows(readme, '## API keys', '## Operator CLI')
  t.ok(rows.length >= 6, 'the spec’s key errors and the contract’s additions')
  for (const row of rows) t.same(catalogEntry(row.message)?.[1], row, `README: ${row.status} ${row.message}`)
  for (const message of ['Invalid or missing API key', 'Invalid or revoked API key', 'This API key does not have access to this resource']) {
    t.ok(
      rows.some((row) => row.message === message),
      `README names the spec's ${message}`,
    )
  }
  t.ok(readme.includes('(docs/errors.md)'), 'and links the complete table')
})

t.test('the contract: every message it names is in the catalog with its status, but those not built yet', async (t) => {
  const contract = read('docs/spec/contract.md')
  const rows = [...tableRows(contract), ...inlineRows(contract)]
  t.ok(rows.length >= 6, 'the contract’s messages were found')
  for (const row of rows) {
    if (UNBUILT_CONTRACT_MESSAGES.has(row.message)) continue
    t.same(catalogEntry(row.message)?.[1], row, `contract: ${row.status} ${row.message}`)
  }
  // The limit's message is given without a status: the spec calls it a validation error, answered 400 like any other.
  t.match(contract.replace(/\s+/g, ' '), /with the message `Active API key limit reached for this scope`/)
  t.same(catalogEntry('Active API key limit reached for this scope')?.[1].status, 400)
  for (const message of UNBUILT_CONTRACT_MESSAGES) {
    t.ok(
      rows.some((row) => row.message === message),
      `still in the contract: ${message}`,
    )
    t.equal(catalogEntry(message), undefined, `not built yet: remove "${message}" from UNBUILT_CONTRACT_MESSAGES once it is`)
  }
})

t.test('the spec §7: each condition is answered with one of its texts and its status (a validation error: 400)', async (t) => {
  const spec = read('docs/spec/scoped-api-keys.md')
  const section = spec.slice(spec.indexOf('## 7. Errors'), spec.indexOf('## 8.'))
  const table = section.slice(section.indexOf('|---'))
  const rows = table.split('\n').filter((line) => line.startsWith('| ') && line.includes('`'))
  t.equal(rows.length, 4, 'the four conditions of the table')
  for (const line of rows) {
    const [, condition, status, texts] = line.split('|').map((cell) => cell.trim())
    const alternatives = [...texts!.matchAll(/`([^`]+)`/g)].map((match) => match[1]!)
    const found = alternatives.map((message) => catalogEntry(message)).filter((entry) => entry !== undefined)
    t.equal(found.length, 1, `${condition}: exactly one of ${alternatives.join(' / ')} is the catalog's`)
    t.equal(found[0]?.[1].status, /^\d{3}$/.test(status!) ? Number(status) : 400, `${condition}: status ${status}`)
  }
})
