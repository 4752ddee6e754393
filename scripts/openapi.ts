/**
 * `npm run openapi`: writes deploy/openapi.json, the OpenAPI 3.1 description
 * of the public API, from the services' route schemas and the route map
 * (scripts/api-document.ts). `npm run openapi -- --check` writes nothing and
 * exits 1 when the file is stale. ROUTES_FILE names another route map
 * (deploy/routes.yaml by default). Needs no database and no Redis.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import { projectRoot } from '../test/helpers/processes.js'
import { buildApiDocument, defaultRoutesFile, formatApiDocument, openApiFile } from './api-document.js'

async function main(): Promise<number> {
  const check = process.argv.includes('--check')
  const routesFile = process.env['ROUTES_FILE'] || defaultRoutesFile
  const { document, problems } = await buildApiDocument(routesFile)
  for (const problem of problems) process.stderr.write(`openapi: ${problem}\n`)
  if (problems.length > 0) return 1
  const text = formatApiDocument(document)
  const file = relative(projectRoot, openApiFile)
  if (check) {
    let current = ''
    try {
      current = readFileSync(openApiFile, 'utf8')
    } catch {
      // Missing: stale.
    }
    if (current === text) return 0
    process.stderr.write(`openapi: ${file} is stale; run npm run openapi\n`)
    return 1
  }
  writeFileSync(openApiFile, text)
  const operations = Object.values(document.paths).reduce((count, item) => count + Object.keys(item).length, 0)
  process.stdout.write(`wrote ${file}: ${Object.keys(document.paths).length} paths, ${operations} operations\n`)
  return 0
}

main().then(
  (status) => process.exit(status),
  (error: unknown) => {
    process.stderr.write(`openapi: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
