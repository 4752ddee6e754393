/**
 * A typed client of the API: openapi-fetch with the types openapi-typescript
 * generates from the served description (`npm run openapi` writes
 * examples/openapi.d.ts from deploy/openapi.json). Paths, parameters, bodies
 * and answers are all checked by the compiler: no casts. It adds an agent,
 * renames it, reads it back, lists every agent page by page, and deletes it.
 *
 *   NODE_EXTRA_CA_CERTS=.data/dev-tls/cert.pem KEY=sak_live_... npx tsx examples/typed-client.ts
 *
 * KEY is a SUB-ACCOUNT key; API the gateway (https://localhost:8443 by default).
 */
import createClient from 'openapi-fetch'
import type { components, paths } from './openapi.js'

type Agent = components['schemas']['Agent']
type ErrorEnvelope = components['schemas']['ErrorEnvelope']

const key = process.env['KEY']
if (key === undefined || key === '') {
  process.stderr.write('KEY: a SUB-ACCOUNT key (npm run --silent ctl -- key create --sub-account S --name examples)\n')
  process.exit(2)
}

// Either scheme works; send exactly one of them (here Authorization: Bearer).
const api = createClient<paths>({ baseUrl: process.env['API'] ?? 'https://localhost:8443', headers: { authorization: `Bearer ${key}` } })

/** Every error is the envelope; 429 and 503 say when to retry. */
function failure(response: Response, error: ErrorEnvelope): Error {
  const retry = response.headers.get('retry-after')
  return new Error(`${response.status} ${error.message}${retry === null ? '' : ` (retry after ${retry} s)`}`)
}

async function everyAgent(): Promise<Agent[]> {
  const agents: Agent[] = []
  let cursor: string | undefined
  do {
    const { data, error, response } = await api.GET('/v1/agents', { params: { query: { limit: 100, cursor } } })
    if (error !== undefined) throw failure(response, error)
    agents.push(...data.data)
    cursor = data.pagination.nextCursor ?? undefined // null on the last page
  } while (cursor !== undefined)
  return agents
}

async function main(): Promise<void> {
  const created = await api.POST('/v1/agents', { body: { name: 'Ada' } })
  if (created.error !== undefined) throw failure(created.response, created.error)
  const { id } = created.data.data
  console.log(`created ${id} ${created.data.data.name}`)

  const renamed = await api.PATCH('/v1/agents/{id}', { params: { path: { id } }, body: { name: 'Ada Lovelace' } })
  if (renamed.error !== undefined) throw failure(renamed.response, renamed.error)
  console.log(`renamed ${id} ${renamed.data.data.name}`)

  const read = await api.GET('/v1/agents/{id}', { params: { path: { id } } })
  if (read.error !== undefined) throw failure(read.response, read.error)
  console.log(`read ${id} ${read.data.data.name}, updated ${read.data.data.updatedAt}`)

  const agents = await everyAgent()
  console.log(`listed ${agents.length} agents`)

  const deleted = await api.DELETE('/v1/agents/{id}', { params: { path: { id } } })
  if (deleted.error !== undefined) throw failure(deleted.response, deleted.error)
  console.log(`deleted ${id} (${deleted.response.status})`)
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
})
