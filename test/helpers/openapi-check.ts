/**
 * Checks a response the gateway gave against the API description it serves
 * (/openapi.json): for a described path and method, the status must be one
 * the operation declares, every required header must be there and every
 * declared header must fit its schema, and the body must be the declared one
 * (or none where none is declared). A method a described path does not take
 * must be answered 405 with `Allow`; an undescribed path under /v1 with the
 * error envelope. Paths outside /v1 (the documents, the console) are not
 * described, so not checked. JSON Schema 2020-12 (OpenAPI 3.1) with formats,
 * by Ajv.
 */
import { Ajv2020 } from 'ajv/dist/2020.js'
import type { ValidateFunction } from 'ajv/dist/2020.js'
import formats from 'ajv-formats'
import type { FormatsPlugin } from 'ajv-formats'

type Json = Record<string, unknown>

/** What the check needs of a response. */
export interface CheckedResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
}

const DOCUMENT_ID = 'https://gateway.test/openapi.json'
const ENVELOPE = '#/components/schemas/ErrorEnvelope'

// ajv-formats is CommonJS with its function as module.exports and as .default; under NodeNext the default import is the module.
const addFormats: FormatsPlugin = formats.default

function escapePointer(part: string): string {
  return part.replaceAll('~', '~0').replaceAll('/', '~1')
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

export class OpenApiCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true })
  private readonly validators = new Map<string, ValidateFunction>()
  private readonly templates: Array<{ path: string; pattern: RegExp; parameters: number }>

  constructor(private readonly document: Json) {
    addFormats(this.ajv)
    this.ajv.addSchema({ ...document, $id: DOCUMENT_ID })
    const paths = Object.keys((document['paths'] ?? {}) as Json)
    this.templates = paths.map((path) => ({
      path,
      pattern: new RegExp(
        `^${path
          .split(/\{[^}]+\}/)
          .map(escapeRegExp)
          .join('[^/]+')}$`,
      ),
      parameters: path.split('{').length - 1,
    }))
  }

  /** The problems of one response to `method path` (empty when it is what the document says). */
  check(method: string, path: string, response: CheckedResponse): string[] {
    const pathname = path.split('?', 1)[0] ?? ''
    if (pathname !== '/v1' && !pathname.startsWith('/v1/')) return []
    const where = `${method} ${path} → ${response.status}`
    const problems = this.requestId(response)
    const template = this.templates.filter(({ pattern }) => pattern.test(pathname)).sort((a, b) => a.parameters - b.parameters)[0]
    const item = template === undefined ? undefined : ((this.document['paths'] as Record<string, Json>)[template.path] as Json)
    // HEAD is GET without the body (RFC 9110 §9.3.2): described by the GET.
    const described = method === 'HEAD' ? 'get' : method.toLowerCase()
    const operation = item?.[described] as Json | undefined
    if (template !== undefined && operation !== undefined) {
      problems.push(...this.checkOperation(`/paths/${escapePointer(template.path)}/${described}`, operation, method, response))
    } else if (response.status < 400) {
      problems.push(`${template === undefined ? 'an undescribed path' : 'a method the path does not take'} answered ${response.status}`)
    } else {
      if (template !== undefined && response.status === 405 && typeof response.headers['allow'] !== 'string') problems.push('a 405 without Allow')
      problems.push(...this.body(ENVELOPE, 'application/json', response))
    }
    return problems.map((problem) => `${where}: ${problem}`)
  }

  private requestId(response: CheckedResponse): string[] {
    const id = response.headers['x-request-id']
    return typeof id === 'string' && id !== '' ? [] : ['no x-request-id']
  }

  /** The declared response for the status (exact, then 4XX, then default), its headers and its body. */
  private checkOperation(pointer: string, operation: Json, method: string, response: CheckedResponse): string[] {
    const responses = (operation['responses'] ?? {}) as Json
    const status = String(response.status)
    const key = [status, `${status[0]}XX`, 'default'].find((candidate) => responses[candidate] !== undefined)
    if (key === undefined) return [`status ${status} is not declared (declared: ${Object.keys(responses).join(', ')})`]
    let declaredPointer = `${pointer}/responses/${key}`
    let declared = responses[key] as Json
    while (typeof declared['$ref'] === 'string') {
      declaredPointer = declared['$ref'].slice(1)
      declared = this.at(declaredPointer)
    }
    const problems = this.headers(declaredPointer, (declared['headers'] ?? {}) as Json, response)
    const content = declared['content'] as Json | undefined
    const mediaType = content === undefined ? undefined : Object.keys(content)[0]
    if (method === 'HEAD') return problems
    if (mediaType === undefined) {
      if (response.text !== '') problems.push(`a body where none is declared: ${response.text.slice(0, 200)}`)
      return problems
    }
    return [...problems, ...this.body(`#${declaredPointer}/content/${escapePointer(mediaType)}/schema`, mediaType, response)]
  }

  private headers(responsePointer: string, declared: Json, response: CheckedResponse): string[] {
    const problems: string[] = []
    for (const [name, entry] of Object.entries(declared)) {
      let pointer = `${responsePointer}/headers/${escapePointer(name)}`
      let header = entry as Json
      while (typeof header['$ref'] === 'string') {
        pointer = header['$ref'].slice(1)
        header = this.at(pointer)
      }
      const value = response.headers[name.toLowerCase()]
      if (value === undefined) {
        if (header['required'] === true) problems.push(`no ${name} header`)
        continue
      }
      if (typeof value !== 'string') {
        problems.push(`${name} sent ${value.length} times`)
        continue
      }
      const schema = (header['schema'] ?? {}) as Json
      const typed = schema['type'] === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value
      problems.push(...this.validate(`#${pointer}/schema`, typed).map((problem) => `${name}: ${problem}`))
    }
    return problems
  }

  private body(schemaRef: string, mediaType: string, response: CheckedResponse): string[] {
    const type = response.headers['content-type']
    if (typeof type !== 'string' || !type.startsWith(mediaType)) return [`content-type ${String(type)}, declared ${mediaType}`]
    let body: unknown
    try {
      body = JSON.parse(response.text)
    } catch {
      return [`a body that is not JSON: ${response.text.slice(0, 200)}`]
    }
    return this.validate(schemaRef, body).map((problem) => `body: ${problem}`)
  }

  private validate(ref: string, value: unknown): string[] {
    let validator = this.validators.get(ref)
    if (validator === undefined) {
      validator = this.ajv.compile({ $ref: `${DOCUMENT_ID}${ref}` })
      this.validators.set(ref, validator)
    }
    if (validator(value)) return []
    return (validator.errors ?? []).map((error) => `${error.instancePath || '/'} ${error.message ?? 'is invalid'} ${JSON.stringify(error.params)}`)
  }

  private at(pointer: string): Json {
    let node: unknown = this.document
    for (const part of pointer.split('/').slice(1)) node = (node as Json)[part.replaceAll('~1', '/').replaceAll('~0', '~')]
    if (typeof node !== 'object' || node === null) throw new Error(`the document has nothing at ${pointer}`)
    return node as Json
  }
}
