/**
 * The console's stylesheet and its one script (agency-service/assets/),
 * served as files under <prefix>/assets/ by @fastify/static: the
 * Content-Security-Policy allows no inline script or style. Browsers keep
 * them but revalidate on every use (`no-cache`), by ETag, so a new version
 * is picked up at once and an unchanged one costs a 304.
 */
import { accessSync } from 'node:fs'
import { basename } from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import { consoleRoutes } from './paths.js'

/**
 * The folder of the files. Resolved from this module, two levels up, so it
 * is the same folder from src/console (tsx) and from dist/console (compiled).
 */
export const ASSETS_DIRECTORY = new URL('../../assets/', import.meta.url)

const contentTypes: Readonly<Record<string, string>> = {
  'console.css': 'text/css; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
}

export async function assetRoutes(app: FastifyInstance): Promise<void> {
  // A deployment without the folder fails at start, not with unstyled pages.
  for (const name of Object.keys(contentTypes)) accessSync(new URL(name, ASSETS_DIRECTORY))
  await app.register(fastifyStatic, {
    root: ASSETS_DIRECTORY,
    prefix: consoleRoutes.assets,
    // A route per file found at start, so nothing else in the folder is reachable through a pattern.
    wildcard: false,
    allowedPath: (pathName) => Object.hasOwn(contentTypes, pathName.replace(/^\//, '')),
    decorateReply: false,
    index: false,
    dotfiles: 'ignore',
    acceptRanges: false,
    lastModified: false,
    etag: true,
    cacheControl: false,
    // Set here instead: the types the console has always sent (send's own table calls a script application/javascript).
    contentType: false,
    setHeaders: (reply, path) => {
      reply.header('cache-control', 'no-cache')
      const type = contentTypes[basename(path)]
      if (type !== undefined && reply.statusCode !== 304) reply.header('content-type', type)
    },
  })
}
