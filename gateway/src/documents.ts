/**
 * The public documents of the API listener, answered by the gateway itself
 * and never forwarded: `GET /openapi.json`, the OpenAPI 3.1 description of
 * the public API (deploy/openapi.json, written by `npm run openapi` from the
 * services' own route schemas and the route map, loaded once at start), and
 * `GET /docs`, a reference page rendered by swagger-ui-dist from that
 * document, whose assets are served from the npm package on this listener
 * (no CDN, and nothing else is fetched: the page's Content-Security-Policy
 * allows this origin only).
 *
 * They need no key (the gate lets exactly these paths through: see
 * isDocumentRequest) and show nothing a caller without one should not see:
 * the document names no upstream, no internal header and no console route.
 * The page sends no request with a key: "try it out" is off, so a key is
 * never typed into a browser page for it.
 *
 * Each is read (and compressed: encoded-document.ts) once, at start, and
 * served from memory. The page's script and stylesheets are served at paths
 * that name their content (`/docs/swagger-ui-bundle.<hash>.js`), so they are
 * cached for a year (`immutable`); the page and /openapi.json, whose paths do
 * not change, for a minute. `/docs/` sends the browser to `/docs`. Every
 * request here counts against its client's budget (document-budget.ts).
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { budgetHeaders } from './rate-limit/headers.js'
import { DocumentBudget } from './document-budget.js'
import type { EncodedDocument } from './encoded-document.js'
import { chooseRepresentation, encodeDocument, matchesIfNoneMatch } from './encoded-document.js'
import type { GatewayMetrics } from './metrics.js'
import { refuse } from './respond.js'
import { decisionOf } from './request-state.js'

export const OPENAPI_PATH = '/openapi.json'
export const DOCS_PATH = '/docs'
/** Sent to DOCS_PATH, so the page has one address whichever a reader typed. */
export const DOCS_SLASH_PATH = '/docs/'

/** The document `npm run openapi` writes; this file is gateway/src/documents.ts or gateway/dist/documents.js. */
export const defaultOpenApiFile = fileURLToPath(new URL('../../deploy/openapi.json', import.meta.url))

/** A minute: how long a reader may go on with a page or document that a new release has changed. */
const SHORT_CACHE = 'public, max-age=60'
/** A year, never revalidated: these paths name their content, so what is there never changes. */
const IMMUTABLE_CACHE = 'public, max-age=31536000, immutable'

/** Marks the routes of this plugin, so the gate can tell them from the forwarder's catch-all. */
export const DOCUMENT_ROUTE = { gatewayDocument: true } as const

/**
 * Whether the gate lets a request through without a key: the router chose one
 * of the documents' own routes (GET or HEAD), and exactly for its canonical
 * path; any other method, or a path the router reads otherwise, goes to the
 * forwarder's catch-all and needs a key like every other request.
 */
export function isDocumentRequest(request: FastifyRequest, canonicalPath: string): boolean {
  const config = request.routeOptions.config as Partial<typeof DOCUMENT_ROUTE> | undefined
  return config?.gatewayDocument === true && request.routeOptions.url === canonicalPath
}

function page(stylesheet: string, bundle: string, script: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Scoped agency API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${stylesheet}">
</head>
<body>
<div id="reference"></div>
<script src="${bundle}"></script>
<script src="${script}"></script>
</body>
</html>
`
}

// Reference only: no "try it out" (no request with a key from this page), no call to the public validator.
const SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '${OPENAPI_PATH}',
    dom_id: '#reference',
    deepLinking: true,
    supportedSubmitMethods: [],
    validatorUrl: null,
    defaultModelsExpandDepth: 0,
  })
})
`

/** Only this origin, and nothing inline but styles (swagger-ui sets style attributes). */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const JAVASCRIPT = 'text/javascript; charset=utf-8'

export interface DocumentsOptions {
  /** The OpenAPI document to serve; deploy/openapi.json by default. */
  file?: string
  /** Document requests per client and minute (GATEWAY_DOCUMENT_LIMIT). */
  limit: number
  metrics: GatewayMetrics
}

function readOpenApi(file: string): Buffer {
  try {
    const document = readFileSync(file)
    const parsed = JSON.parse(document.toString('utf8')) as { openapi?: unknown }
    if (typeof parsed.openapi !== 'string') throw new Error('not an OpenAPI document')
    return document
  } catch (error) {
    throw new Error(`cannot serve ${OPENAPI_PATH} from ${file} (npm run openapi writes it): ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
}

/** A document's path, with its content's hash before the extension: `/docs/swagger-ui.<hash>.css`. */
function versionedPath(name: string, document: EncodedDocument): string {
  const dot = name.lastIndexOf('.')
  return `/docs/${name.slice(0, dot)}.${document.hash}${name.slice(dot)}`
}

interface Served {
  path: string
  document: EncodedDocument
  cache: string
  /** Headers of this document alone (the page's policy, CORS for the API description). */
  headers: Record<string, string>
}

/** Every document, read and compressed. */
async function loadDocuments(openApiFile: string): Promise<Served[]> {
  const uiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const [openApi, stylesheet, bundle, script] = await Promise.all([
    encodeDocument(readOpenApi(openApiFile), 'application/json; charset=utf-8'),
    encodeDocument(readFileSync(join(uiDir, 'swagger-ui.css')), 'text/css; charset=utf-8'),
    encodeDocument(readFileSync(join(uiDir, 'swagger-ui-bundle.js')), JAVASCRIPT),
    encodeDocument(SCRIPT, JAVASCRIPT),
  ])
  const assets: Array<[string, EncodedDocument]> = [
    ['swagger-ui.css', stylesheet],
    ['swagger-ui-bundle.js', bundle],
    ['docs.js', script],
  ]
  const [stylesheetPath, bundlePath, scriptPath] = assets.map(([name, document]) => versionedPath(name, document)) as [string, string, string]
  const reference = await encodeDocument(page(stylesheetPath, bundlePath, scriptPath), 'text/html; charset=utf-8')
  return [
    // A public document without credentials: any origin may read it (API tools, editors).
    { path: OPENAPI_PATH, document: openApi, cache: SHORT_CACHE, headers: { 'access-control-allow-origin': '*' } },
    { path: DOCS_PATH, document: reference, cache: SHORT_CACHE, headers: { 'content-security-policy': PAGE_POLICY, 'x-frame-options': 'DENY' } },
    ...assets.map(([name, document]) => ({ path: versionedPath(name, document), document, cache: IMMUTABLE_CACHE, headers: {} })),
  ]
}

async function documents(app: FastifyInstance, options: DocumentsOptions): Promise<void> {
  const served = await loadDocuments(options.file ?? defaultOpenApiFile)
  const budget = new DocumentBudget(options.limit)
  const windowSeconds = Math.round(budget.windowMs / 1000)

  /** Counts the request against its client's budget; false (and 429 sent) when over it. */
  function withinBudget(request: FastifyRequest, reply: FastifyReply): boolean {
    const decision = budget.take(decisionOf(request).client)
    if (!decision.allowed) {
      options.metrics.countThrottled('documents')
      refuse(request, reply, 'documents-throttled', budgetHeaders('documents', budget.limit, windowSeconds, 0, decision.retryAfterSeconds))
      return false
    }
    reply.headers(budgetHeaders('documents', budget.limit, windowSeconds, decision.remaining, decision.resetSeconds))
    return true
  }

  function answer(request: FastifyRequest, reply: FastifyReply, { document, cache, headers }: Served): FastifyReply {
    const chosen = chooseRepresentation(document, request.headers['accept-encoding'])
    reply
      .headers(headers)
      .header('content-type', document.type)
      .header('etag', chosen.etag)
      .header('cache-control', cache)
      .header('vary', 'accept-encoding')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cross-origin-resource-policy', 'same-origin')
    if (matchesIfNoneMatch(request.headers['if-none-match'], chosen.etag)) return reply.code(304).send()
    if (chosen.coding !== 'identity') reply.header('content-encoding', chosen.coding)
    reply.header('content-length', chosen.body.length)
    return reply.send(request.method === 'HEAD' ? undefined : chosen.body)
  }

  const methods: Array<'GET' | 'HEAD'> = ['GET', 'HEAD']
  for (const document of served) {
    app.route({
      method: methods,
      url: document.path,
      config: DOCUMENT_ROUTE,
      handler: async (request, reply) => (withinBudget(request, reply) ? answer(request, reply, document) : reply),
    })
  }
  app.route({
    method: methods,
    url: DOCS_SLASH_PATH,
    config: DOCUMENT_ROUTE,
    handler: async (request, reply) => (withinBudget(request, reply) ? reply.code(301).header('location', DOCS_PATH).send() : reply),
  })
}

export const documentsPlugin = fp(documents, { name: 'gateway-documents', fastify: '5.x', dependencies: ['gateway-gate'] })
