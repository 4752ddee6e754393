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
 */
import { createHash } from 'node:crypto'
import { createReadStream, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

export const OPENAPI_PATH = '/openapi.json'
export const DOCS_PATH = '/docs'
const DOCS_SCRIPT_PATH = '/docs/docs.js'

/** The document `npm run openapi` writes; this file is gateway/src/documents.ts or gateway/dist/documents.js. */
export const defaultOpenApiFile = fileURLToPath(new URL('../../deploy/openapi.json', import.meta.url))

/** swagger-ui-dist's files the page loads, by the path they are served at. */
const UI_ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  '/docs/swagger-ui.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  '/docs/swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
}

/** Every path served here: the only paths on the API listener that need no key. */
export const DOCUMENT_PATHS: ReadonlySet<string> = new Set([OPENAPI_PATH, DOCS_PATH, DOCS_SCRIPT_PATH, ...Object.keys(UI_ASSETS)])

/**
 * Whether the gate lets a request through without a key: its canonical path
 * is one of DOCUMENT_PATHS and the router chose that document's own route
 * (GET or HEAD; any other method, or a path the router reads otherwise, goes
 * to the forwarder's catch-all and needs a key like every other request).
 */
export function isDocumentRequest(request: FastifyRequest, canonicalPath: string): boolean {
  return DOCUMENT_PATHS.has(canonicalPath) && request.routeOptions.url === canonicalPath
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Scoped agency API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="${DOCS_SCRIPT_PATH}"></script>
</body>
</html>
`

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

export interface DocumentsOptions {
  /** The OpenAPI document to serve; deploy/openapi.json by default. */
  file?: string
}

function etagOf(content: Buffer | string): string {
  return `"${createHash('sha256').update(content).digest('base64url').slice(0, 32)}"`
}

async function documents(app: FastifyInstance, options: DocumentsOptions): Promise<void> {
  const file = options.file ?? defaultOpenApiFile
  let document: Buffer
  try {
    document = readFileSync(file)
    const parsed = JSON.parse(document.toString('utf8')) as { openapi?: unknown }
    if (typeof parsed.openapi !== 'string') throw new Error('not an OpenAPI document')
  } catch (error) {
    throw new Error(`cannot serve ${OPENAPI_PATH} from ${file} (npm run openapi writes it): ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
  const uiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const uiVersion = (JSON.parse(readFileSync(join(uiDir, 'package.json'), 'utf8')) as { version: string }).version
  const assets = Object.entries(UI_ASSETS).map(([path, asset]) => {
    const location = join(uiDir, asset.file)
    return { path, location, type: asset.type, size: statSync(location).size, etag: `"swagger-ui-${uiVersion}-${asset.file}"` }
  })

  function answer(request: FastifyRequest, reply: FastifyReply, type: string, etag: string, cache: string): boolean {
    reply
      .header('content-type', type)
      .header('etag', etag)
      .header('cache-control', cache)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cross-origin-resource-policy', 'same-origin')
    if (request.headers['if-none-match'] === etag) {
      reply.code(304).send()
      return false
    }
    return true
  }

  const methods: Array<'GET' | 'HEAD'> = ['GET', 'HEAD']
  const documentTag = etagOf(document)
  app.route({
    method: methods,
    url: OPENAPI_PATH,
    handler: async (request, reply) => {
      // A public document without credentials: any origin may read it (API tools, editors).
      reply.header('access-control-allow-origin', '*')
      if (!answer(request, reply, 'application/json; charset=utf-8', documentTag, 'no-cache')) return reply
      return reply.send(document)
    },
  })
  const pageTag = etagOf(PAGE)
  app.route({
    method: methods,
    url: DOCS_PATH,
    handler: async (request, reply) => {
      reply.header('content-security-policy', PAGE_POLICY).header('x-frame-options', 'DENY')
      if (!answer(request, reply, 'text/html; charset=utf-8', pageTag, 'no-cache')) return reply
      return reply.send(PAGE)
    },
  })
  const scriptTag = etagOf(SCRIPT)
  app.route({
    method: methods,
    url: DOCS_SCRIPT_PATH,
    handler: async (request, reply) => {
      if (!answer(request, reply, 'text/javascript; charset=utf-8', scriptTag, 'no-cache')) return reply
      return reply.send(SCRIPT)
    },
  })
  for (const asset of assets) {
    app.route({
      method: methods,
      url: asset.path,
      handler: async (request, reply) => {
        if (!answer(request, reply, asset.type, asset.etag, 'public, max-age=86400')) return reply
        // Streamed from the package, never held in memory.
        return reply.header('content-length', asset.size).send(request.method === 'HEAD' ? undefined : createReadStream(asset.location))
      },
    })
  }
}

export const documentsPlugin = fp(documents, { name: 'gateway-documents', fastify: '5.x', dependencies: ['gateway-gate'] })
