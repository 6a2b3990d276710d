/*
 * protocol._cdecode: a table-driven decoder for kcoord's generated message classes.
 *
 * protocol/codegen.py compiles each (message, version) schema into a "program" of nested tuples
 * (the format is described in codegen.py, next to the code that builds it) and hands it to
 * compile(). compile() validates the program once, resolves every field name to the byte offset
 * of its __slots__ member, and returns a callable with the generated Python decoder's contract:
 *
 *     dec(buf, pos, blen) -> (obj, new_pos)
 *
 * Besides the decoder: Java's string hash (the router's placement of groups) and encode_records, the
 * records section of a RecordBatch v2 that every shard append writes (protocol/record_batch.py).
 *
 * Why C: the pure-Python decoders were already straight-line code; what remained per field was
 * interpreter dispatch (see bench/RESULTS.md, "## Codec"). Here a field costs a switch and the
 * object it produces.
 *
 * Safety rules, the reason this file is written the way it is:
 * - every read is bounded by min(blen, len(buf)); lengths and counts are compared with what
 *   remains *before* anything is allocated for them (a count never exceeds the bytes left);
 * - all arithmetic on lengths is done in 64 bits after checking the value is non-negative, so
 *   a 5-byte varint (up to 2^35 - 1) cannot overflow a Py_ssize_t sum;
 * - recursion depth is bounded by the schema (structs nest a fixed number of levels), never by
 *   the input, and every loop consumes input or is bounded by a checked count;
 * - any malformed input raises protocol.primitives.CodecError (handed in by configure());
 * - instances are allocated first and their slots filled as fields are decoded, so on any error
 *   a single Py_DECREF of the half-built object releases everything decoded so far.
 *
 * The Python decoders peek fixed-size fields past blen (bounded by len(buf)) and let
 * Message.decode_from / the tagged-field size check reject the result; bounding every read by
 * blen here rejects exactly the same inputs, just earlier (positions only grow, so a read that
 * crosses blen always ends in a rejection there too). Decoded objects are identical.
 *
 * Only exact `bytes` buffers are decoded here (every caller in kcoord passes bytes). Anything
 * else (bytearray, memoryview) is handed to the generated Python decoder, whose slices keep the
 * buffer's type: that keeps results identical without holding buffer exports across callbacks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

/* Op codes: must match codegen.py (which reads them from this module's attributes). */
enum {
    OP_BOOL = 0,
    OP_INT8 = 1,
    OP_INT16 = 2,
    OP_UINT16 = 3,
    OP_INT32 = 4,
    OP_INT64 = 5,
    OP_FLOAT64 = 6,
    OP_UUID = 7,
    OP_STRING = 8,
    OP_BYTES = 9,
    OP_STRUCT = 10,
    OP_ARRAY = 11,
};
/* How a length or count is written. */
enum { LEN_INT16 = 0, LEN_INT32 = 1, LEN_COMPACT = 2 };
/* How an absent field gets its default: a shared immutable constant, a fresh [], or cls(). */
enum { DEF_CONST = 0, DEF_LIST = 1, DEF_CALL = 2 };

/* Bumped whenever the program format changes, so a stale .so is refused rather than misread. */
#define PROGRAM_FORMAT 2
#define MAX_UVARINT_BYTES 5
#define MAX_STRING_BYTES 0x7fff /* Kafka's limit on any string field, in UTF-8 bytes */

static PyObject *CodecError; /* protocol.primitives.CodecError */
static PyObject *UUIDType;   /* uuid.UUID */

typedef struct SProg SProg;
typedef struct Op Op;

struct Op {
    int kind;
    int lenkind;     /* OP_STRING, OP_BYTES, OP_ARRAY */
    int nullable;    /* OP_STRING, OP_BYTES, OP_ARRAY, OP_STRUCT (presence byte) */
    PyObject *label; /* "string GroupId", for error messages (owned, may be NULL) */
    SProg *sub;      /* OP_STRUCT */
    Op *elem;        /* OP_ARRAY */
};

typedef struct {
    Py_ssize_t offset;
    Op op;
} FieldOp;

typedef struct {
    uint64_t tag;
    Py_ssize_t offset;
    Op op;
} TagOp;

typedef struct {
    Py_ssize_t offset;
    int kind;
    PyObject *value; /* DEF_CONST: the constant; DEF_CALL: the class (owned) */
} DefOp;

struct SProg {
    PyTypeObject *cls; /* owned */
    int flexible;
    Py_ssize_t nfields, ntags, ndefs;
    FieldOp *fields;
    TagOp *tags;
    DefOp *defs;
    Py_ssize_t unk_offset;
};

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* ---------------------------------------------------------------------------------------------
 * Freeing and GC traversal of a compiled program.
 */

static void sprog_free(SProg *sp);

static void op_clear(Op *op)
{
    Py_CLEAR(op->label);
    if (op->sub != NULL) {
        sprog_free(op->sub);
        op->sub = NULL;
    }
    if (op->elem != NULL) {
        op_clear(op->elem);
        PyMem_Free(op->elem);
        op->elem = NULL;
    }
}

static void sprog_free(SProg *sp)
{
    Py_ssize_t i;
    if (sp == NULL)
        return;
    if (sp->fields != NULL)
        for (i = 0; i < sp->nfields; i++)
            op_clear(&sp->fields[i].op);
    if (sp->tags != NULL)
        for (i = 0; i < sp->ntags; i++)
            op_clear(&sp->tags[i].op);
    if (sp->defs != NULL)
        for (i = 0; i < sp->ndefs; i++)
            Py_CLEAR(sp->defs[i].value);
    PyMem_Free(sp->fields);
    PyMem_Free(sp->tags);
    PyMem_Free(sp->defs);
    Py_CLEAR(sp->cls);
    PyMem_Free(sp);
}

static int sprog_traverse(SProg *sp, visitproc visit, void *arg);

static int op_traverse(Op *op, visitproc visit, void *arg)
{
    if (op->sub != NULL) {
        int r = sprog_traverse(op->sub, visit, arg);
        if (r)
            return r;
    }
    if (op->elem != NULL)
        return op_traverse(op->elem, visit, arg);
    return 0;
}

/* The classes a program references hold (via _DECODERS) the decoder that holds the program:
 * a reference cycle, so the program must be visible to the GC. */
static int sprog_traverse(SProg *sp, visitproc visit, void *arg)
{
    Py_ssize_t i;
    int r;
    if (sp == NULL)
        return 0;
    Py_VISIT(sp->cls);
    for (i = 0; i < sp->nfields; i++)
        if ((r = op_traverse(&sp->fields[i].op, visit, arg)))
            return r;
    for (i = 0; i < sp->ntags; i++)
        if ((r = op_traverse(&sp->tags[i].op, visit, arg)))
            return r;
    for (i = 0; i < sp->ndefs; i++)
        Py_VISIT(sp->defs[i].value);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Compiling a program (tuples from codegen.py) into the C structures above.
 * Errors here are programming errors in codegen.py: they raise TypeError/ValueError.
 */

static SProg *compile_struct(PyObject *spec);

/* Byte offset of the __slots__ member `name` of `cls`, read once from its member descriptor so
 * decoding can store straight into the instance (what object.__setattr__ would end up doing). */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *name)
{
    PyObject *d = PyObject_GetAttr((PyObject *)cls, name);
    PyMemberDef *m;
    Py_ssize_t off;
    if (d == NULL)
        return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%U is not a __slots__ member", cls->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    if (!PyType_IsSubtype(cls, PyDescr_TYPE(d))) {
        PyErr_Format(PyExc_TypeError, "%s.%U belongs to another class", cls->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    m = ((PyMemberDescrObject *)d)->d_member;
    off = m->offset;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY) || off < (Py_ssize_t)sizeof(PyObject) ||
        off + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "%s.%U is not a writable object slot", cls->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    Py_DECREF(d);
    return off;
}

static int is_fixed(int kind) { return kind >= OP_BOOL && kind <= OP_FLOAT64; }

static Py_ssize_t fixed_size(int kind)
{
    switch (kind) {
    case OP_BOOL:
    case OP_INT8:
        return 1;
    case OP_INT16:
    case OP_UINT16:
        return 2;
    case OP_INT32:
        return 4;
    default:
        return 8; /* int64, float64 */
    }
}

/* op: (kind,) | (OP_UUID,) | (kind, lenkind, nullable, label) for string/bytes
 *     | (OP_STRUCT, nullable, struct_spec) | (OP_ARRAY, lenkind, nullable, label, elem_op) */
static int compile_op(PyObject *spec, Op *op)
{
    int kind;
    memset(op, 0, sizeof(*op));
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 1) {
        PyErr_SetString(PyExc_TypeError, "op must be a non-empty tuple");
        return -1;
    }
    kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    if (kind == -1 && PyErr_Occurred())
        return -1;
    op->kind = kind;
    if (is_fixed(kind) || kind == OP_UUID) {
        if (PyTuple_GET_SIZE(spec) != 1) {
            PyErr_SetString(PyExc_ValueError, "fixed op takes no arguments");
            return -1;
        }
        return 0;
    }
    if (kind == OP_STRING || kind == OP_BYTES) {
        PyObject *label;
        if (!PyArg_ParseTuple(spec, "iipU", &kind, &op->lenkind, &op->nullable, &label))
            return -1;
        if (op->lenkind < LEN_INT16 || op->lenkind > LEN_COMPACT) {
            PyErr_SetString(PyExc_ValueError, "bad length kind");
            return -1;
        }
        op->label = Py_NewRef(label);
        return 0;
    }
    if (kind == OP_STRUCT) {
        PyObject *sub;
        if (!PyArg_ParseTuple(spec, "iiO!", &kind, &op->nullable, &PyTuple_Type, &sub))
            return -1;
        op->sub = compile_struct(sub);
        return op->sub == NULL ? -1 : 0;
    }
    if (kind == OP_ARRAY) {
        PyObject *label, *elem;
        if (!PyArg_ParseTuple(spec, "iipUO!", &kind, &op->lenkind, &op->nullable, &label, &PyTuple_Type, &elem))
            return -1;
        if (op->lenkind != LEN_INT32 && op->lenkind != LEN_COMPACT) {
            PyErr_SetString(PyExc_ValueError, "bad array length kind");
            return -1;
        }
        op->label = Py_NewRef(label);
        op->elem = PyMem_Calloc(1, sizeof(Op));
        if (op->elem == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (compile_op(elem, op->elem) < 0)
            return -1;
        if (op->elem->kind == OP_ARRAY || (op->elem->kind == OP_STRUCT && op->elem->nullable) ||
            ((op->elem->kind == OP_STRING || op->elem->kind == OP_BYTES) && op->elem->nullable)) {
            PyErr_SetString(PyExc_ValueError, "array elements are never arrays or nullable");
            return -1;
        }
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "unknown op kind %d", kind);
    return -1;
}

/* struct: (cls, flexible, ((name, op), ...), ((tag, name, op), ...), ((name, defkind, value), ...)) */
static SProg *compile_struct(PyObject *spec)
{
    PyObject *cls, *fields, *tags, *defs, *uname;
    int flexible;
    Py_ssize_t i;
    SProg *sp;

    if (!PyArg_ParseTuple(spec, "O!pO!O!O!", &PyType_Type, &cls, &flexible, &PyTuple_Type, &fields,
                          &PyTuple_Type, &tags, &PyTuple_Type, &defs))
        return NULL;
    if (((PyTypeObject *)cls)->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "class has no tp_alloc");
        return NULL;
    }
    sp = PyMem_Calloc(1, sizeof(SProg));
    if (sp == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    sp->cls = (PyTypeObject *)Py_NewRef(cls);
    sp->flexible = flexible;
    /* Counts are set as entries get compiled, so sprog_free only sees initialised entries. */
    sp->fields = PyMem_Calloc(PyTuple_GET_SIZE(fields) + 1, sizeof(FieldOp));
    sp->tags = PyMem_Calloc(PyTuple_GET_SIZE(tags) + 1, sizeof(TagOp));
    sp->defs = PyMem_Calloc(PyTuple_GET_SIZE(defs) + 1, sizeof(DefOp));
    if (sp->fields == NULL || sp->tags == NULL || sp->defs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *name, *op;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "UO!", &name, &PyTuple_Type, &op))
            goto fail;
        sp->nfields = i + 1;
        if ((sp->fields[i].offset = slot_offset(sp->cls, name)) < 0 || compile_op(op, &sp->fields[i].op) < 0)
            goto fail;
    }
    for (i = 0; i < PyTuple_GET_SIZE(tags); i++) {
        PyObject *name, *op;
        unsigned long long tag;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(tags, i), "KUO!", &tag, &name, &PyTuple_Type, &op))
            goto fail;
        sp->ntags = i + 1;
        sp->tags[i].tag = tag;
        if ((sp->tags[i].offset = slot_offset(sp->cls, name)) < 0 || compile_op(op, &sp->tags[i].op) < 0)
            goto fail;
    }
    for (i = 0; i < PyTuple_GET_SIZE(defs); i++) {
        PyObject *name, *value;
        int kind;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(defs, i), "UiO", &name, &kind, &value))
            goto fail;
        if (kind < DEF_CONST || kind > DEF_CALL || (kind == DEF_CALL && !PyCallable_Check(value))) {
            PyErr_SetString(PyExc_ValueError, "bad default");
            goto fail;
        }
        sp->ndefs = i + 1;
        sp->defs[i].kind = kind;
        sp->defs[i].value = Py_NewRef(value);
        if ((sp->defs[i].offset = slot_offset(sp->cls, name)) < 0)
            goto fail;
    }
    uname = PyUnicode_FromString("unknown_tagged");
    if (uname == NULL)
        goto fail;
    sp->unk_offset = slot_offset(sp->cls, uname);
    Py_DECREF(uname);
    if (sp->unk_offset < 0)
        goto fail;
    return sp;
fail:
    sprog_free(sp);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding.
 */

typedef struct {
    const unsigned char *b;
    Py_ssize_t pos;
    Py_ssize_t end; /* never beyond the buffer; lowered to a tagged field's end inside it */
} Reader;

static int truncated(const Reader *r, Py_ssize_t need)
{
    PyErr_Format(CodecError, "truncated: %zd bytes needed at offset %zd, %zd left", need, r->pos,
                 r->end - r->pos);
    return -1;
}

#define NEED(r, n)                                                                                             \
    do {                                                                                                       \
        if ((r)->end - (r)->pos < (n)) {                                                                       \
            truncated((r), (n));                                                                               \
            return NULL;                                                                                       \
        }                                                                                                      \
    } while (0)

/* Unsigned LEB128 of at most 5 bytes. Like primitives.decode_uvarint the value is not masked to
 * 32 bits (5 groups of 7 bits: up to 2^35 - 1), so both backends agree on every input. */
static int read_uvarint(Reader *r, uint64_t *out)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < MAX_UVARINT_BYTES; i++) {
        unsigned int byte;
        if (r->pos >= r->end) {
            PyErr_SetString(CodecError, "truncated varint");
            return -1;
        }
        byte = r->b[r->pos++];
        v |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *out = v;
            return 0;
        }
    }
    PyErr_SetString(CodecError, "varint longer than 5 bytes");
    return -1;
}

/* A length or count: -1 (or any negative classic value) means null. */
static int read_length(Reader *r, int lenkind, int64_t *out)
{
    const unsigned char *p;
    if (lenkind == LEN_COMPACT) {
        uint64_t v;
        if (read_uvarint(r, &v) < 0)
            return -1;
        *out = (int64_t)v - 1; /* v < 2^35: no overflow */
        return 0;
    }
    if (lenkind == LEN_INT16) {
        if (r->end - r->pos < 2)
            return truncated(r, 2);
        p = r->b + r->pos;
        *out = (int16_t)(uint16_t)((p[0] << 8) | p[1]);
        r->pos += 2;
        return 0;
    }
    if (r->end - r->pos < 4)
        return truncated(r, 4);
    p = r->b + r->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
    r->pos += 4;
    return 0;
}

static PyObject *decode_struct(Reader *r, const SProg *sp);

static PyObject *read_fixed(Reader *r, int kind)
{
    const unsigned char *p;
    Py_ssize_t n = fixed_size(kind);
    NEED(r, n);
    p = r->b + r->pos;
    r->pos += n;
    switch (kind) {
    case OP_BOOL:
        return Py_NewRef(p[0] ? Py_True : Py_False); /* struct's '?': any non-zero byte is True */
    case OP_INT8:
        return PyLong_FromLong((int8_t)p[0]);
    case OP_INT16:
        return PyLong_FromLong((int16_t)(uint16_t)((p[0] << 8) | p[1]));
    case OP_UINT16:
        return PyLong_FromLong((long)((p[0] << 8) | p[1]));
    case OP_INT32:
        return PyLong_FromLong(
            (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]));
    case OP_INT64: {
        uint64_t v = 0;
        int i;
        for (i = 0; i < 8; i++)
            v = (v << 8) | p[i];
        return PyLong_FromLongLong((long long)(int64_t)v);
    }
    default: { /* OP_FLOAT64 */
        double d = PyFloat_Unpack8((const char *)p, 0);
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        return PyFloat_FromDouble(d);
    }
    }
}

/* A strict UTF-8 decode failure becomes a CodecError, with the UnicodeDecodeError as its cause
 * (what Message.decode's `raise CodecError(...) from exc` does for the Python decoders). */
static void utf8_error(const Op *op)
{
    PyObject *type, *value, *tb, *type2, *value2, *tb2;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(CodecError, "%U is not valid UTF-8: %S", op->label, value);
    PyErr_Fetch(&type2, &value2, &tb2);
    PyErr_NormalizeException(&type2, &value2, &tb2);
    if (value2 != NULL && value != NULL)
        PyException_SetCause(value2, Py_NewRef(value));
    PyErr_Restore(type2, value2, tb2);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static PyObject *read_value(Reader *r, const Op *op)
{
    switch (op->kind) {
    case OP_STRING:
    case OP_BYTES: {
        int64_t len;
        const char *start;
        if (read_length(r, op->lenkind, &len) < 0)
            return NULL;
        if (len < 0) {
            if (op->nullable)
                Py_RETURN_NONE;
            PyErr_Format(CodecError, "non-nullable %U is null", op->label);
            return NULL;
        }
        /* Kafka's generated readers refuse a string longer than 0x7fff bytes, compact ones too. */
        if (op->kind == OP_STRING && len > MAX_STRING_BYTES) {
            PyErr_Format(CodecError, "%U had invalid length %lld", op->label, (long long)len);
            return NULL;
        }
        if (len > r->end - r->pos) {
            PyErr_Format(CodecError, "%U runs past end of frame", op->label);
            return NULL;
        }
        start = (const char *)r->b + r->pos;
        r->pos += (Py_ssize_t)len;
        if (op->kind == OP_BYTES)
            return PyBytes_FromStringAndSize(start, (Py_ssize_t)len);
        {
            PyObject *s = PyUnicode_DecodeUTF8(start, (Py_ssize_t)len, NULL);
            if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                utf8_error(op);
            return s;
        }
    }
    case OP_STRUCT:
        if (op->nullable == 2) {
            /* In a tagged field Kafka's generator writes the presence as an unsigned varint, 0 null. */
            uint64_t present;
            /* kcoord wrote an int8 -1 here before it matched Kafka: a lone 0xff still means null. */
            if (r->end - r->pos == 1 && r->b[r->pos] == 0xff) {
                r->pos++;
                Py_RETURN_NONE;
            }
            if (read_uvarint(r, &present) < 0)
                return NULL;
            if (present == 0)
                Py_RETURN_NONE;
        } else if (op->nullable) {
            /* Nullable structs carry a presence byte: negative (-1) is null, anything else present. */
            NEED(r, 1);
            if ((int8_t)r->b[r->pos++] < 0)
                Py_RETURN_NONE;
        }
        return decode_struct(r, op->sub);
    case OP_UUID: {
        PyObject *raw, *u;
        NEED(r, 16);
        raw = PyBytes_FromStringAndSize((const char *)r->b + r->pos, 16);
        if (raw == NULL)
            return NULL;
        r->pos += 16;
        /* uuid.UUID(None, raw) == uuid.UUID(bytes=raw): the object the Python decoder builds. */
        u = PyObject_CallFunctionObjArgs(UUIDType, Py_None, raw, NULL);
        Py_DECREF(raw);
        return u;
    }
    case OP_ARRAY: {
        int64_t n;
        Py_ssize_t i, left;
        PyObject *list;
        const Op *elem = op->elem;
        if (read_length(r, op->lenkind, &n) < 0)
            return NULL;
        if (n < 0) {
            if (op->nullable)
                Py_RETURN_NONE;
            PyErr_Format(CodecError, "non-nullable %U is null", op->label);
            return NULL;
        }
        /* Every element takes at least one byte except structs with no fields in this version,
         * so a count above the bytes left is refused before the list is allocated; fixed-size
         * elements are checked against their total size. */
        left = r->end - r->pos;
        if (n > left || (is_fixed(elem->kind) && n * fixed_size(elem->kind) > left)) {
            PyErr_Format(CodecError, "%U: %lld elements exceed the frame", op->label, (long long)n);
            return NULL;
        }
        list = PyList_New((Py_ssize_t)n);
        if (list == NULL)
            return NULL;
        for (i = 0; i < (Py_ssize_t)n; i++) {
            PyObject *v = is_fixed(elem->kind) ? read_fixed(r, elem->kind) : read_value(r, elem);
            if (v == NULL) {
                Py_DECREF(list); /* list_dealloc skips the NULL items not yet filled */
                return NULL;
            }
            PyList_SET_ITEM(list, i, v);
        }
        return list;
    }
    default:
        return read_fixed(r, op->kind);
    }
}

static PyObject *decode_struct(Reader *r, const SProg *sp)
{
    Py_ssize_t i;
    /* What object.__new__(cls) does for these classes; memory is zeroed, so every slot starts
     * NULL and a half-built instance deallocates cleanly. */
    PyObject *obj = sp->cls->tp_alloc(sp->cls, 0);
    if (obj == NULL)
        return NULL;
    for (i = 0; i < sp->nfields; i++) {
        const FieldOp *f = &sp->fields[i];
        PyObject *v = is_fixed(f->op.kind) ? read_fixed(r, f->op.kind) : read_value(r, &f->op);
        if (v == NULL)
            goto fail;
        SLOT(obj, f->offset) = v;
    }
    if (sp->flexible) {
        uint64_t ntags, k;
        if (read_uvarint(r, &ntags) < 0)
            goto fail;
        /* Each tagged field takes at least two bytes (tag and size), so this loop is bounded by
         * the input even for a count near 2^35. */
        for (k = 0; k < ntags; k++) {
            uint64_t tag, size;
            Py_ssize_t te, j;
            const TagOp *known = NULL;
            if (read_uvarint(r, &tag) < 0 || read_uvarint(r, &size) < 0)
                goto fail;
            if (size > (uint64_t)(r->end - r->pos)) {
                PyErr_SetString(CodecError, "tagged field past end of frame");
                goto fail;
            }
            te = r->pos + (Py_ssize_t)size;
            for (j = 0; j < sp->ntags; j++) {
                if (sp->tags[j].tag == tag) {
                    known = &sp->tags[j];
                    break;
                }
            }
            if (known != NULL) {
                Py_ssize_t outer = r->end;
                PyObject *v;
                r->end = te;
                v = read_value(r, &known->op);
                r->end = outer;
                if (v == NULL)
                    goto fail;
                /* A known tagged field must fill exactly the size it declared. */
                if (r->pos != te) {
                    Py_DECREF(v);
                    PyErr_Format(CodecError, "tagged field %llu does not match its size", (unsigned long long)tag);
                    goto fail;
                }
                /* A tag repeated on the wire: the last one wins, as in the Python decoder. */
                Py_XSETREF(SLOT(obj, known->offset), v);
            }
            else {
                PyObject *unk = SLOT(obj, sp->unk_offset);
                PyObject *t, *raw, *pair;
                int rc;
                if (unk == NULL) {
                    unk = PyList_New(0);
                    if (unk == NULL)
                        goto fail;
                    SLOT(obj, sp->unk_offset) = unk;
                }
                t = PyLong_FromUnsignedLongLong(tag);
                if (t == NULL)
                    goto fail;
                raw = PyBytes_FromStringAndSize((const char *)r->b + r->pos, (Py_ssize_t)size);
                if (raw == NULL) {
                    Py_DECREF(t);
                    goto fail;
                }
                pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(t);
                    Py_DECREF(raw);
                    goto fail;
                }
                PyTuple_SET_ITEM(pair, 0, t);
                PyTuple_SET_ITEM(pair, 1, raw);
                rc = PyList_Append(unk, pair);
                Py_DECREF(pair);
                if (rc < 0)
                    goto fail;
                r->pos = te;
            }
        }
    }
    if (SLOT(obj, sp->unk_offset) == NULL)
        SLOT(obj, sp->unk_offset) = Py_NewRef(Py_None);
    /* Fields absent from this version, and tagged fields the wire did not carry. */
    for (i = 0; i < sp->ndefs; i++) {
        const DefOp *d = &sp->defs[i];
        PyObject *v;
        if (SLOT(obj, d->offset) != NULL)
            continue;
        if (d->kind == DEF_CONST)
            v = Py_NewRef(d->value);
        else if (d->kind == DEF_LIST)
            v = PyList_New(0); /* mutable defaults are fresh per object */
        else
            v = PyObject_CallNoArgs(d->value);
        if (v == NULL)
            goto fail;
        SLOT(obj, d->offset) = v;
    }
    return obj;
fail:
    Py_DECREF(obj);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Skipping: walk a message with the same bounds checks as decoding, but build nothing.
 *
 * The gateway relays Produce and Fetch responses unchanged unless they carry broker addresses,
 * which live in the root's tagged fields at the very end of the body. Finding that section means
 * walking every partition; decoding them would allocate an object per field and copy every
 * record batch. Skipping costs a length read per field. Known tagged fields of nested structs are
 * stepped over by their declared size, like unknown ones: their content is not needed here.
 */

static int skip_struct(Reader *r, const SProg *sp);

static int skip_tags(Reader *r)
{
    uint64_t ntags, k;
    if (read_uvarint(r, &ntags) < 0)
        return -1;
    for (k = 0; k < ntags; k++) {
        uint64_t tag, size;
        if (read_uvarint(r, &tag) < 0 || read_uvarint(r, &size) < 0)
            return -1;
        if (size > (uint64_t)(r->end - r->pos)) {
            PyErr_SetString(CodecError, "tagged field past end of frame");
            return -1;
        }
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* A string's, bytes' or array's length; -1 (null) only where the op is nullable. */
static int skip_length(Reader *r, const Op *op, int64_t *out)
{
    if (read_length(r, op->lenkind, out) < 0)
        return -1;
    if (*out < 0 && !op->nullable) {
        PyErr_Format(CodecError, "non-nullable %U is null", op->label);
        return -1;
    }
    return 0;
}

static int skip_value(Reader *r, const Op *op)
{
    if (is_fixed(op->kind) || op->kind == OP_UUID) {
        Py_ssize_t n = op->kind == OP_UUID ? 16 : fixed_size(op->kind);
        if (r->end - r->pos < n)
            return truncated(r, n);
        r->pos += n;
        return 0;
    }
    switch (op->kind) {
    case OP_STRING:
    case OP_BYTES: {
        int64_t len;
        if (skip_length(r, op, &len) < 0)
            return -1;
        if (len < 0)
            return 0;
        if (len > r->end - r->pos) {
            PyErr_Format(CodecError, "%U runs past end of frame", op->label);
            return -1;
        }
        r->pos += (Py_ssize_t)len;
        return 0;
    }
    case OP_STRUCT:
        if (op->nullable) {
            if (r->end - r->pos < 1)
                return truncated(r, 1);
            if ((int8_t)r->b[r->pos++] < 0)
                return 0;
        }
        return skip_struct(r, op->sub);
    case OP_ARRAY: {
        int64_t n, i;
        const Op *elem = op->elem;
        Py_ssize_t left;
        if (skip_length(r, op, &n) < 0)
            return -1;
        if (n < 0)
            return 0;
        left = r->end - r->pos;
        if (n > left) {
            PyErr_Format(CodecError, "%U: %lld elements exceed the frame", op->label, (long long)n);
            return -1;
        }
        if (is_fixed(elem->kind)) {
            Py_ssize_t total = (Py_ssize_t)n * fixed_size(elem->kind);
            if (total > left)
                return truncated(r, total);
            r->pos += total;
            return 0;
        }
        for (i = 0; i < n; i++) {
            if (skip_value(r, elem) < 0)
                return -1;
        }
        return 0;
    }
    default:
        PyErr_Format(CodecError, "cannot skip op kind %d", op->kind);
        return -1;
    }
}

static int skip_fields(Reader *r, const SProg *sp)
{
    Py_ssize_t i;
    for (i = 0; i < sp->nfields; i++) {
        if (skip_value(r, &sp->fields[i].op) < 0)
            return -1;
    }
    return 0;
}

static int skip_struct(Reader *r, const SProg *sp)
{
    if (skip_fields(r, sp) < 0)
        return -1;
    return sp->flexible ? skip_tags(r) : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The Program object (owns a compiled program) and the decoder callable bound to it.
 */

typedef struct {
    PyObject_HEAD
    SProg *root;
    PyObject *fallback; /* the generated Python decoder, for non-bytes buffers */
} Program;

static int Program_traverse(Program *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    return sprog_traverse(self->root, visit, arg);
}

static int Program_clear(Program *self)
{
    SProg *root = self->root;
    self->root = NULL;
    sprog_free(root);
    Py_CLEAR(self->fallback);
    return 0;
}

static void Program_dealloc(Program *self)
{
    PyObject_GC_UnTrack(self);
    Program_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "protocol._cdecode.Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A compiled decoder program (internal).",
    .tp_traverse = (traverseproc)Program_traverse,
    .tp_clear = (inquiry)Program_clear,
    .tp_dealloc = (destructor)Program_dealloc,
};

/* Set up a reader over buf[pos:blen] of an exact bytes object: blen is lowered to the buffer's
 * size (never read past it, whatever the caller says the frame's end is) and pos must lie inside. */
static int reader_init(Reader *r, PyObject *buf, Py_ssize_t pos, Py_ssize_t blen)
{
    Py_ssize_t size = PyBytes_GET_SIZE(buf);
    if (blen > size)
        blen = size;
    if (pos < 0 || pos > blen) {
        PyErr_Format(CodecError, "start offset %zd outside the frame (0..%zd)", pos, blen);
        return -1;
    }
    r->b = (const unsigned char *)PyBytes_AS_STRING(buf);
    r->pos = pos;
    r->end = blen;
    return 0;
}

static PyObject *program_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Program *prog = (Program *)self;
    PyObject *buf, *obj, *result, *newpos;
    Py_ssize_t pos, blen;
    Reader r;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "decoder takes 3 arguments (buf, pos, blen), %zd given", nargs);
        return NULL;
    }
    buf = args[0];
    if (!PyBytes_CheckExact(buf)) {
        if (prog->fallback == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "decoder was cleared");
            return NULL;
        }
        return PyObject_Vectorcall(prog->fallback, args, nargs, NULL);
    }
    if (prog->root == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decoder was cleared");
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    blen = PyLong_AsSsize_t(args[2]);
    if (blen == -1 && PyErr_Occurred())
        return NULL;
    if (reader_init(&r, buf, pos, blen) < 0)
        return NULL;
    obj = decode_struct(&r, prog->root);
    if (obj == NULL)
        return NULL;
    newpos = PyLong_FromSsize_t(r.pos);
    if (newpos == NULL) {
        Py_DECREF(obj);
        return NULL;
    }
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(obj);
        Py_DECREF(newpos);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, obj);
    PyTuple_SET_ITEM(result, 1, newpos);
    return result;
}

static PyMethodDef decode_def = {
    "decode",
    (PyCFunction)(void (*)(void))program_decode,
    METH_FASTCALL,
    "decode(buf, pos, blen) -> (obj, new_pos); raises CodecError on malformed input.",
};

/* ---------------------------------------------------------------------------------------------
 * Module functions.
 */

static PyObject *mod_configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *codec_error, *uuid_type;
    if (!PyArg_ParseTuple(args, "O!O!:configure", &PyType_Type, &codec_error, &PyType_Type, &uuid_type))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)codec_error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "codec_error must be an exception class");
        return NULL;
    }
    Py_XSETREF(CodecError, Py_NewRef(codec_error));
    Py_XSETREF(UUIDType, Py_NewRef(uuid_type));
    Py_RETURN_NONE;
}

static PyObject *mod_compile(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *spec, *fallback, *fn;
    Program *prog;
    if (!PyArg_ParseTuple(args, "O!O:compile", &PyTuple_Type, &spec, &fallback))
        return NULL;
    if (CodecError == NULL || UUIDType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "call configure() before compile()");
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    prog = PyObject_GC_New(Program, &ProgramType);
    if (prog == NULL)
        return NULL;
    prog->root = NULL;
    prog->fallback = Py_NewRef(fallback);
    PyObject_GC_Track(prog);
    prog->root = compile_struct(spec);
    if (prog->root == NULL) {
        Py_DECREF(prog);
        return NULL;
    }
    fn = PyCFunction_New(&decode_def, (PyObject *)prog);
    Py_DECREF(prog);
    return fn;
}

/* tag_section(decoder, buf, pos, blen) -> offset where the root struct's tagged fields start
 * (for a non-flexible version: where the message ends). */
static PyObject *mod_tag_section(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *decoder, *buf, *self;
    Py_ssize_t pos, blen;
    Program *prog;
    Reader r;
    if (!PyArg_ParseTuple(args, "OO!nn:tag_section", &decoder, &PyBytes_Type, &buf, &pos, &blen))
        return NULL;
    if (!PyCFunction_Check(decoder) || (self = PyCFunction_GET_SELF(decoder)) == NULL ||
        !PyObject_TypeCheck(self, &ProgramType)) {
        PyErr_SetString(PyExc_TypeError, "decoder must be a callable returned by compile()");
        return NULL;
    }
    prog = (Program *)self;
    if (prog->root == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decoder was cleared");
        return NULL;
    }
    if (reader_init(&r, buf, pos, blen) < 0)
        return NULL;
    if (skip_fields(&r, prog->root) < 0)
        return NULL;
    return PyLong_FromSsize_t(r.pos);
}

/* ---------------------------------------------------------------------------------------------
 * Java's String.hashCode, for the router's placement of groups on shards (runtime/router.py).
 *
 * Not decoding, but it lives here because this is kcoord's one C extension: a DescribeGroups request
 * naming 20,000 group ids hashes each of them, and in Python that loop was a fifth of the request's
 * CPU (bench/RESULTS.md, hostile clients). router.py keeps the pure-Python version, used without
 * the extension; tests/unit/test_codec_cdecode.py checks that both agree.
 */

/* h = 31 * h + unit over the string's UTF-16 code units, in 32 bits, as Java's int arithmetic. */
static int java_hash_of(PyObject *s, int32_t *out)
{
    uint32_t h = 0;
    Py_ssize_t i, n;
    int kind;
    const void *data;
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "a str is required");
        return -1;
    }
    n = PyUnicode_GET_LENGTH(s);
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (i = 0; i < n; i++)
            h = 31u * h + p[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (i = 0; i < n; i++)
            h = 31u * h + p[i];
    } else {
        for (i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 0x10000) { /* a surrogate pair in UTF-16 */
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            } else {
                h = 31u * h + c;
            }
        }
    }
    *out = (int32_t)h;
    return 0;
}

static PyObject *mod_java_string_hash(PyObject *Py_UNUSED(module), PyObject *s)
{
    int32_t h;
    if (java_hash_of(s, &h) < 0)
        return NULL;
    return PyLong_FromLong(h);
}

/* Kafka's partition for a group: Utils.abs(groupId.hashCode()) % partitions, where Utils.abs maps
 * Integer.MIN_VALUE to 0. */
static PyObject *mod_group_partition(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    int32_t h;
    long n;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "group_partition(group_id, partitions) takes 2 arguments");
        return NULL;
    }
    if (java_hash_of(args[0], &h) < 0)
        return NULL;
    n = PyLong_AsLong(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions must be positive");
        return NULL;
    }
    return PyLong_FromLong((long)(h == INT32_MIN ? 0 : (h < 0 ? -(long)h : (long)h)) % n);
}

/* -- the records section of a RecordBatch v2 (protocol/record_batch.py encode_records) -------------- */

static Py_ssize_t varint_size(int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); /* zig-zag */
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

/* Unsigned LEB128 (the protocol's uvarint), at most 10 bytes. */
static unsigned char *put_uvarint(unsigned char *p, uint64_t u)
{
    while (u >= 0x80) {
        *p++ = (unsigned char)((u & 0x7F) | 0x80);
        u >>= 7;
    }
    *p++ = (unsigned char)u;
    return p;
}

static unsigned char *put_varint(unsigned char *p, int64_t v)
{
    return put_uvarint(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); /* zig-zag */
}

/* A record's key or value: its varint length and bytes, or varint -1 for None (null). */
static unsigned char *put_nullable_bytes(unsigned char *p, PyObject *b)
{
    Py_ssize_t len;
    if (b == Py_None) {
        *p++ = 1; /* zig-zag varint of -1 */
        return p;
    }
    len = PyBytes_GET_SIZE(b);
    p = put_varint(p, len);
    memcpy(p, PyBytes_AS_STRING(b), (size_t)len);
    return p + len;
}

/* A record's body size: attributes, timestamp delta, offset delta, key, value, header count. */
static Py_ssize_t record_body_size(Py_ssize_t index, PyObject *key, PyObject *value)
{
    Py_ssize_t size = 2 + varint_size(index) + 1;
    size += key == Py_None ? 1 : varint_size(PyBytes_GET_SIZE(key)) + PyBytes_GET_SIZE(key);
    size += value == Py_None ? 1 : varint_size(PyBytes_GET_SIZE(value)) + PyBytes_GET_SIZE(value);
    return size;
}

/* encode_records(pairs) -> the records section for a list of (key, value) pairs, each bytes or None:
 * offset deltas 0..n-1, attributes 0, timestamp delta 0, no headers. None when the argument is
 * anything else (a tuple, a pair that is a list, a bytearray): the Python version encodes those. */
static PyObject *mod_encode_records(PyObject *Py_UNUSED(module), PyObject *records)
{
    Py_ssize_t n, i, total = 0;
    PyObject *out;
    unsigned char *p;
    if (!PyList_CheckExact(records))
        Py_RETURN_NONE;
    n = PyList_GET_SIZE(records);
    for (i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(records, i), *key, *value;
        Py_ssize_t body;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            Py_RETURN_NONE;
        key = PyTuple_GET_ITEM(pair, 0);
        value = PyTuple_GET_ITEM(pair, 1);
        if ((key != Py_None && !PyBytes_CheckExact(key)) || (value != Py_None && !PyBytes_CheckExact(value)))
            Py_RETURN_NONE;
        body = record_body_size(i, key, value);
        total += varint_size(body) + body;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    p = (unsigned char *)PyBytes_AS_STRING(out);
    /* The list cannot change in between: nothing above or below runs Python code. */
    for (i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(records, i);
        PyObject *key = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
        p = put_varint(p, record_body_size(i, key, value));
        *p++ = 0; /* attributes */
        *p++ = 0; /* timestamp delta */
        p = put_varint(p, i);
        p = put_nullable_bytes(p, key);
        p = put_nullable_bytes(p, value);
        *p++ = 0; /* no headers */
    }
    return out;
}

/* -- an offset commit record's key (v0) and value (v3) (protocol/records.py _offset_commit_pair) ------- */

static unsigned char *put_be(unsigned char *p, uint64_t v, int bytes)
{
    int i;
    for (i = bytes - 1; i >= 0; i--)
        p[bytes - 1 - i] = (unsigned char)(v >> (8 * i));
    return p + bytes;
}

/* An int in [lo, hi] into *out; 0 when it is not an int or out of range (nothing raised). */
static int int_in_range(PyObject *o, long long lo, long long hi, long long *out)
{
    int overflow = 0;
    long long v;
    if (!PyLong_Check(o))
        return 0;
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* An ASCII str's bytes as an int16-length string: 1, or 0 when not an exact ASCII str or too long
 * (the caller answers None: the Python encoder takes the rest, so no UTF-8 copy is cached in a str
 * the offset store keeps). */
static int short_string(PyObject *o, const char **data, Py_ssize_t *len)
{
    if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_COMPACT_ASCII(o))
        return 0;
    *data = (const char *)PyUnicode_DATA(o);
    *len = PyUnicode_GET_LENGTH(o);
    return *len <= 0x7FFF;
}

/* offset_commit_pair(record_type, value_version, group, topic, partition
 *                    [, offset, leader_epoch, metadata, commit_timestamp])
 * -> (key, value or None): the key v0 and, given the value's fields, its v3 value; None for what the
 * Python encoders must handle (a number out of its field's range, a string too long, not ASCII or
 * not a str). */
static PyObject *mod_offset_commit_pair(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long long rtype, vversion, partition, offset = 0, epoch = 0, ts = 0;
    const char *g, *t, *md = NULL;
    Py_ssize_t glen, tlen, mdlen = 0;
    PyObject *key, *value, *pair;
    unsigned char *p;
    if (nargs != 5 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "offset_commit_pair takes 5 or 9 arguments");
        return NULL;
    }
    if (!int_in_range(args[0], INT16_MIN, INT16_MAX, &rtype) || !int_in_range(args[1], INT16_MIN, INT16_MAX, &vversion)
        || !int_in_range(args[4], INT32_MIN, INT32_MAX, &partition))
        Py_RETURN_NONE;
    if (!short_string(args[2], &g, &glen) || !short_string(args[3], &t, &tlen))
        Py_RETURN_NONE;
    if (nargs == 9) {
        if (!int_in_range(args[5], INT64_MIN, INT64_MAX, &offset) || !int_in_range(args[6], INT32_MIN, INT32_MAX, &epoch)
            || !int_in_range(args[8], INT64_MIN, INT64_MAX, &ts))
            Py_RETURN_NONE;
        if (!short_string(args[7], &md, &mdlen))
            Py_RETURN_NONE;
    }
    key = PyBytes_FromStringAndSize(NULL, 2 + 2 + glen + 2 + tlen + 4);
    if (key == NULL)
        return NULL;
    p = (unsigned char *)PyBytes_AS_STRING(key);
    p = put_be(p, (uint64_t)rtype, 2);
    p = put_be(p, (uint64_t)glen, 2);
    memcpy(p, g, (size_t)glen);
    p += glen;
    p = put_be(p, (uint64_t)tlen, 2);
    memcpy(p, t, (size_t)tlen);
    p += tlen;
    put_be(p, (uint64_t)partition, 4);
    if (nargs == 5) {
        value = Py_None;
        Py_INCREF(value);
    } else {
        value = PyBytes_FromStringAndSize(NULL, 2 + 8 + 4 + 2 + mdlen + 8);
        if (value == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        p = (unsigned char *)PyBytes_AS_STRING(value);
        p = put_be(p, (uint64_t)vversion, 2);
        p = put_be(p, (uint64_t)offset, 8);
        p = put_be(p, (uint64_t)epoch, 4);
        p = put_be(p, (uint64_t)mdlen, 2);
        memcpy(p, md, (size_t)mdlen);
        p += mdlen;
        put_be(p, (uint64_t)ts, 8);
    }
    pair = PyTuple_Pack(2, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    return pair;
}

/* ---- An OffsetCommit response frame (protocol/frames.py encode_response) ------------------------
 *
 * The answer to every commit: at 1,000 committers one per commit, each built by the generated Python
 * encoder (three nested functions, a bytearray grown piece by piece, a struct.pack per partition).
 * Here the whole frame, size prefix and header included, in one pass over the message's attributes
 * into a buffer that grows as it goes (attribute reads may run Python code in a subclass: nothing is
 * held borrowed across them). None for what the Python encoder must handle: v10 (topic ids), unknown
 * tagged fields, a name that is not an ASCII str, a number out of its field's range, an array that
 * is not a list; the same bytes otherwise (tests/unit/test_offset_commit_response_c.py). */

typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
} OutBuf;

static int out_reserve(OutBuf *b, Py_ssize_t more)
{
    Py_ssize_t need = b->len + more;
    if (need <= b->cap)
        return 1;
    Py_ssize_t cap = b->cap * 2 > need ? b->cap * 2 : need + 64;
    unsigned char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    b->data = data;
    b->cap = cap;
    return 1;
}

static void out_be(OutBuf *b, uint64_t v, int bytes) /* room reserved by the caller */
{
    put_be(b->data + b->len, v, bytes);
    b->len += bytes;
}

static void out_uvarint(OutBuf *b, uint64_t v) /* room for 10 bytes reserved by the caller */
{
    b->len = put_uvarint(b->data + b->len, v) - b->data;
}

static PyObject *s_throttle_time_ms, *s_topics, *s_name, *s_partitions, *s_partition_index, *s_error_code,
    *s_unknown_tagged;

static int intern_names(void)
{
#define INTERN(var, text)                                                                                      \
    if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL)                                       \
        return 0;
    INTERN(s_throttle_time_ms, "throttle_time_ms")
    INTERN(s_topics, "topics")
    INTERN(s_name, "name")
    INTERN(s_partitions, "partitions")
    INTERN(s_partition_index, "partition_index")
    INTERN(s_error_code, "error_code")
    INTERN(s_unknown_tagged, "unknown_tagged")
#undef INTERN
    return 1;
}

/* 1: the attribute is a number in [lo, hi] (*v); 0: fall back to Python; -1: an error is set. */
static int attr_int(PyObject *o, PyObject *name, long long lo, long long hi, long long *v)
{
    PyObject *a = PyObject_GetAttr(o, name);
    int ok;
    if (a == NULL)
        return -1;
    ok = int_in_range(a, lo, hi, v);
    Py_DECREF(a);
    return ok;
}

/* 1: no unknown tagged fields (None or an empty list); 0: some (or something else); -1: error. */
static int attr_no_tags(PyObject *o)
{
    PyObject *a = PyObject_GetAttr(o, s_unknown_tagged);
    int ok;
    if (a == NULL)
        return -1;
    ok = a == Py_None || (PyList_CheckExact(a) && PyList_GET_SIZE(a) == 0);
    Py_DECREF(a);
    return ok;
}

/* An array's length: int32 (v < 8) or compact, uvarint of n + 1 (v >= 8). */
static int out_array_len(OutBuf *b, Py_ssize_t n, int flexible)
{
    if (!out_reserve(b, 10))
        return 0;
    if (flexible)
        out_uvarint(b, (uint64_t)n + 1);
    else
        out_be(b, (uint64_t)n, 4);
    return 1;
}

/* A list's length, then each item by ``out_item`` (1 written, 0 fall back, -1 error, as it returns).
 * The length written is the list's now; an item's attribute read (a subclass's Python code) that
 * changes the list's length falls back. */
static int out_list(OutBuf *b, PyObject *list, int (*out_item)(OutBuf *, PyObject *, int), int flexible)
{
    Py_ssize_t i, n = PyList_GET_SIZE(list);
    int r = out_array_len(b, n, flexible) ? 1 : -1;
    for (i = 0; r == 1 && i < n; i++) {
        PyObject *item;
        if (PyList_GET_SIZE(list) != n)
            return 0;
        item = PyList_GET_ITEM(list, i);
        Py_INCREF(item);
        r = out_item(b, item, flexible);
        Py_DECREF(item);
    }
    if (r == 1 && PyList_GET_SIZE(list) != n)
        r = 0;
    return r;
}

/* 1 written, 0 fall back, -1 error. */
static int out_partition(OutBuf *b, PyObject *p, int flexible)
{
    long long index, code;
    int r;
    if ((r = attr_int(p, s_partition_index, INT32_MIN, INT32_MAX, &index)) != 1)
        return r;
    if ((r = attr_int(p, s_error_code, INT16_MIN, INT16_MAX, &code)) != 1)
        return r;
    if (flexible && (r = attr_no_tags(p)) != 1)
        return r;
    if (!out_reserve(b, 7))
        return -1;
    out_be(b, (uint64_t)index, 4);
    out_be(b, (uint64_t)code, 2);
    if (flexible)
        b->data[b->len++] = 0;
    return 1;
}

static int out_topic(OutBuf *b, PyObject *t, int flexible)
{
    PyObject *name, *parts;
    const char *data;
    Py_ssize_t len;
    int r = 0;
    if (flexible && (r = attr_no_tags(t)) != 1)
        return r;
    name = PyObject_GetAttr(t, s_name);
    if (name == NULL)
        return -1;
    if (!short_string(name, &data, &len)) {
        Py_DECREF(name);
        return 0;
    }
    if (!out_reserve(b, 10 + len)) {
        Py_DECREF(name);
        return -1;
    }
    if (flexible)
        out_uvarint(b, (uint64_t)len + 1);
    else
        out_be(b, (uint64_t)len, 2);
    memcpy(b->data + b->len, data, (size_t)len);
    b->len += len;
    Py_DECREF(name);
    parts = PyObject_GetAttr(t, s_partitions);
    if (parts == NULL)
        return -1;
    if (!PyList_CheckExact(parts)) {
        Py_DECREF(parts);
        return 0;
    }
    r = out_list(b, parts, out_partition, flexible);
    Py_DECREF(parts);
    if (r == 1 && flexible) {
        if (!out_reserve(b, 1))
            return -1;
        b->data[b->len++] = 0;
    }
    return r;
}

/* offset_commit_response(version, correlation_id, response) -> the response frame, or None. */
static PyObject *mod_offset_commit_response(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    long long version, correlation, throttle = 0;
    PyObject *resp, *topics, *frame = NULL;
    OutBuf b = {NULL, 0, 0};
    Py_ssize_t n;
    int flexible, r = 1;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "offset_commit_response takes 3 arguments");
        return NULL;
    }
    if (!intern_names())
        return NULL;
    if (!int_in_range(args[0], 2, 9, &version) || !int_in_range(args[1], INT32_MIN, INT32_MAX, &correlation))
        Py_RETURN_NONE;
    resp = args[2];
    flexible = version >= 8;
    if (version >= 3 && (r = attr_int(resp, s_throttle_time_ms, INT32_MIN, INT32_MAX, &throttle)) != 1)
        goto done;
    if (flexible && (r = attr_no_tags(resp)) != 1)
        goto done;
    topics = PyObject_GetAttr(resp, s_topics);
    if (topics == NULL) {
        r = -1;
        goto done;
    }
    if (!PyList_CheckExact(topics)) {
        Py_DECREF(topics);
        r = 0;
        goto done;
    }
    n = PyList_GET_SIZE(topics);
    if (!out_reserve(&b, 64 + 32 * n)) {
        Py_DECREF(topics);
        r = -1;
        goto done;
    }
    b.len = 4; /* the size, written last */
    out_be(&b, (uint64_t)correlation, 4);
    if (flexible)
        b.data[b.len++] = 0; /* response header v1: no tagged fields */
    if (version >= 3)
        out_be(&b, (uint64_t)throttle, 4);
    r = out_list(&b, topics, out_topic, flexible);
    Py_DECREF(topics);
    if (r == 1 && flexible) {
        if (out_reserve(&b, 1))
            b.data[b.len++] = 0;
        else
            r = -1;
    }
    if (r == 1) {
        put_be(b.data, (uint64_t)(b.len - 4), 4);
        frame = PyBytes_FromStringAndSize((const char *)b.data, b.len);
    }
done:
    PyMem_Free(b.data);
    if (r == 1)
        return frame;
    if (r == 0)
        Py_RETURN_NONE;
    return NULL;
}

/* ---- The relay's Produce scan (coordinator/net/relay/guard.py: produce_scan) ----------------------
 *
 * A relayed Produce is not decoded: the relay reads its acks (acks=0 changes how its answer is
 * paired) and the guard its topic names (or ids) and transactional id, to refuse kcoord's internal
 * topics. This is that read in one call, the hot path of every relayed Produce; it mirrors the
 * Python functions of guard.py and requests.py step by step, errors included (a test runs both on
 * the same frames, truncated and malformed ones too): body_start, produce_acks,
 * produce_names_protected, produce_transaction_protected. Positions are 64-bit and every read is
 * bounded by the frame's length; where the Python code slices (which clamps), so does this. */

static int scan_fail(const char *msg)
{
    PyErr_SetString(CodecError, msg);
    return -1;
}

/* primitives.decode_uvarint: the decoder's read_uvarint (the same messages), at a scan position,
 * which may lie outside the frame (a length of -1 steps back one byte). */
static int scan_uvarint(const uint8_t *p, int64_t end, int64_t *pos, int64_t *out)
{
    Reader r;
    uint64_t v;
    if (*pos < 0)
        return scan_fail("truncated varint");
    r.b = p;
    r.pos = (Py_ssize_t)*pos;
    r.end = (Py_ssize_t)end;
    if (read_uvarint(&r, &v) < 0)
        return -1;
    *out = (int64_t)v;
    *pos = r.pos;
    return 0;
}

/* frames.skip_tagged_fields */
static int scan_tagged(const uint8_t *p, int64_t end, int64_t *pos)
{
    int64_t count, tag, size, i;
    if (*pos >= 0 && *pos < end && p[*pos] == 0) {
        *pos += 1;
        return 0;
    }
    if (scan_uvarint(p, end, pos, &count) < 0)
        return -1;
    for (i = 0; i < count; i++) {
        if (scan_uvarint(p, end, pos, &tag) < 0 || scan_uvarint(p, end, pos, &size) < 0)
            return -1;
        *pos += size;
        if (*pos > end)
            return scan_fail("header tagged field past end of frame");
    }
    return 0;
}

/* payload[pos] (Python's IndexError, which guard.py reports as below) */
static int scan_byte(const uint8_t *p, int64_t end, int64_t pos, long version, int64_t *out)
{
    if (pos < 0 || pos >= end) {
        PyErr_Format(CodecError, "Produce v%ld ends inside its topics: index out of range", version);
        return -1;
    }
    *out = p[pos];
    return 0;
}

/* A compact length (unsigned varint), read as guard.py reads it: one byte when under 0x80, else the varint. */
static int scan_compact_length(const uint8_t *p, int64_t end, int64_t *pos, long version, int64_t *out)
{
    if (scan_byte(p, end, *pos, version, out) < 0)
        return -1;
    if (*out < 0x80) {
        *pos += 1;
        return 0;
    }
    return scan_uvarint(p, end, pos, out);
}

/* A tagged-fields section: one 0 byte when empty (the usual case), else skipped field by field. */
static int scan_tags(const uint8_t *p, int64_t end, int64_t *pos, long version)
{
    int64_t byte;
    if (scan_byte(p, end, *pos, version, &byte) < 0)
        return -1;
    if (byte == 0) {
        *pos += 1;
        return 0;
    }
    return scan_tagged(p, end, pos);
}

static int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static int32_t be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* struct.unpack_from(">h"/">i", payload, pos) (struct.error, which guard.py reports as below) */
static int scan_int(const uint8_t *p, int64_t end, int64_t pos, int width, long version, int64_t *out)
{
    if (pos < 0 || pos + width > end) {
        PyErr_Format(CodecError, "Produce v%ld ends inside its topics: %d bytes wanted at offset %lld of %lld",
                     version, width, (long long)pos, (long long)end);
        return -1;
    }
    *out = width == 2 ? be16(p + pos) : be32(p + pos);
    return 0;
}

/* payload[start:stop] in keys (a slice clamps as Python's does); 1, 0, or -1 on error */
static int scan_key_in(const uint8_t *p, int64_t end, int64_t start, int64_t stop, PyObject *keys)
{
    PyObject *key;
    int found;
    if (start < 0)
        start = start + end < 0 ? 0 : start + end;
    if (stop < 0)
        stop = stop + end < 0 ? 0 : stop + end;
    if (start > end)
        start = end;
    if (stop > end)
        stop = end;
    if (stop < start)
        stop = start;
    key = PyBytes_FromStringAndSize((const char *)p + start, (Py_ssize_t)(stop - start));
    if (key == NULL)
        return -1;
    found = PySequence_Contains(keys, key);
    Py_DECREF(key);
    return found;
}

/* guard.produce_names_protected from topics_at */
static int scan_names(const uint8_t *p, int64_t end, long version, int64_t pos, PyObject *keys)
{
    int64_t count, remaining, size, partitions, i, byte;
    int found;
    if (version >= 9) {
        int by_id = version >= 13;
        if (scan_compact_length(p, end, &pos, version, &count) < 0)
            return -1;
        for (remaining = count - 2; remaining >= 0; remaining--) {
            int64_t start = pos;
            if (by_id) {
                pos += 16;
                found = scan_key_in(p, end, start, start + 16, keys);
            }
            else {
                if (scan_compact_length(p, end, &pos, version, &size) < 0)
                    return -1;
                found = scan_key_in(p, end, pos, pos + size - 1, keys);
                pos += size - 1;
            }
            if (found != 0)
                return found;
            if (remaining == 0)
                return 0;
            if (scan_uvarint(p, end, &pos, &partitions) < 0)
                return -1;
            for (i = 0; i < partitions - 1; i++) {
                int shift, k;
                pos += 4;
                size = 0;
                for (k = 0, shift = 0; k < 5; k++, shift += 7) {
                    if (scan_byte(p, end, pos, version, &byte) < 0)
                        return -1;
                    pos += 1;
                    size |= (byte & 0x7f) << shift;
                    if (byte < 0x80)
                        break;
                }
                if (k == 5) {
                    PyErr_Format(CodecError, "Produce v%ld: a records length longer than 5 bytes", version);
                    return -1;
                }
                if (size > 1)
                    pos += size - 1;
                if (scan_tags(p, end, &pos, version) < 0)
                    return -1;
            }
            if (scan_tags(p, end, &pos, version) < 0)
                return -1;
        }
        return 0;
    }
    if (scan_int(p, end, pos, 4, version, &count) < 0)
        return -1;
    pos += 4;
    for (remaining = count - 1; remaining >= 0; remaining--) {
        if (scan_int(p, end, pos, 2, version, &size) < 0)
            return -1;
        pos += 2;
        found = scan_key_in(p, end, pos, pos + size, keys);
        if (found != 0)
            return found;
        if (remaining == 0)
            return 0;
        pos += size > 0 ? size : 0;
        if (scan_int(p, end, pos, 4, version, &partitions) < 0)
            return -1;
        pos += 4;
        for (i = 0; i < partitions; i++) {
            if (scan_int(p, end, pos + 4, 4, version, &size) < 0)
                return -1;
            pos += 8 + (size > 0 ? size : 0);
        }
    }
    return 0;
}

static PyObject *mod_produce_scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    const uint8_t *p;
    int64_t end, pos, n, body, acks_at, acks, size;
    long version;
    int flexible, protected_;
    Py_ssize_t prefix_len;
    if (nargs != 4 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "produce_scan(payload: bytes, version, keys, prefix: bytes)");
        return NULL;
    }
    p = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    end = PyBytes_GET_SIZE(args[0]);
    version = PyLong_AsLong(args[1]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    flexible = version >= 9;
    /* relay_messages.body_start */
    if (end < 10) {
        scan_fail("request header truncated before client id");
        return NULL;
    }
    n = be16(p + 8);
    pos = 10 + (n > 0 ? n : 0);
    if (pos > end) {
        scan_fail("client id runs past end of frame");
        return NULL;
    }
    if (flexible && scan_tagged(p, end, &pos) < 0)
        return NULL;
    body = pos;
    /* requests.produce_acks */
    if (version >= 3) {
        if (flexible) {
            if (scan_uvarint(p, end, &pos, &n) < 0)
                return NULL;
            pos += n - 1 > 0 ? n - 1 : 0;
        }
        else {
            if (pos + 2 > end) {
                PyErr_Format(CodecError, "Produce v%ld truncated in its transactional id", version);
                return NULL;
            }
            n = be16(p + pos);
            pos += 2 + (n > 0 ? n : 0);
        }
    }
    if (pos + 2 > end) {
        PyErr_Format(CodecError, "Produce v%ld ends before its acks (%lld bytes, acks at %lld)", version,
                     (long long)end, (long long)pos);
        return NULL;
    }
    acks = be16(p + pos);
    acks_at = pos;
    /* guard.produce_names_protected, then guard.produce_transaction_protected */
    protected_ = scan_names(p, end, version, acks_at + 6, args[2]);
    if (protected_ < 0)
        return NULL;
    prefix_len = PyBytes_GET_SIZE(args[3]);
    if (!protected_ && prefix_len) {
        pos = body;
        if (flexible) {
            if (scan_uvarint(p, end, &pos, &size) < 0)
                return NULL;
            size -= 1;
        }
        else {
            if (scan_int(p, end, pos, 2, version, &size) < 0)
                return NULL;
            pos += 2;
        }
        protected_ = size >= prefix_len && pos + prefix_len <= end &&
                     memcmp(p + pos, PyBytes_AS_STRING(args[3]), (size_t)prefix_len) == 0;
    }
    return Py_BuildValue("(LLO)", (long long)acks, (long long)acks_at, protected_ ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"configure", mod_configure, METH_VARARGS,
     "configure(codec_error, uuid_type): the exception to raise and the uuid class to build."},
    {"compile", mod_compile, METH_VARARGS,
     "compile(program, fallback) -> decoder(buf, pos, blen); fallback handles non-bytes buffers."},
    {"tag_section", mod_tag_section, METH_VARARGS,
     "tag_section(decoder, buf, pos, blen) -> where the message's own tagged fields start (nothing built)."},
    {"java_string_hash", mod_java_string_hash, METH_O,
     "java_string_hash(s) -> Java's String.hashCode of s (over its UTF-16 code units)."},
    {"group_partition", (PyCFunction)(void (*)(void))mod_group_partition, METH_FASTCALL,
     "group_partition(group_id, partitions) -> Kafka's Utils.abs(group_id.hashCode()) % partitions."},
    {"offset_commit_pair", (PyCFunction)(void (*)(void))mod_offset_commit_pair, METH_FASTCALL,
     "offset_commit_pair(type, value_version, group, topic, partition[, offset, epoch, metadata, ts]) -> (key, value) or None."},
    {"encode_records", mod_encode_records, METH_O,
     "encode_records(pairs) -> a RecordBatch's records section, or None for anything but a list of (bytes|None) pairs."},
    {"offset_commit_response", (PyCFunction)(void (*)(void))mod_offset_commit_response, METH_FASTCALL,
     "offset_commit_response(version, correlation_id, response) -> the OffsetCommit response frame, or None."},
    {"produce_scan", (PyCFunction)(void (*)(void))mod_produce_scan, METH_FASTCALL,
     "produce_scan(payload, version, keys, prefix) -> (acks, acks offset, names a protected topic or id)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cdecode_module = {
    PyModuleDef_HEAD_INIT,
    "protocol._cdecode",
    "Table-driven decoder for kcoord's generated message classes (see protocol/codegen.py).",
    -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__cdecode(void)
{
    PyObject *m;
    if (PyType_Ready(&ProgramType) < 0)
        return NULL;
    m = PyModule_Create(&cdecode_module);
    if (m == NULL)
        return NULL;
#define ADD_INT(name)                                                                                          \
    if (PyModule_AddIntConstant(m, #name, name) < 0)                                                           \
        goto fail;
    ADD_INT(PROGRAM_FORMAT)
    ADD_INT(OP_BOOL)
    ADD_INT(OP_INT8)
    ADD_INT(OP_INT16)
    ADD_INT(OP_UINT16)
    ADD_INT(OP_INT32)
    ADD_INT(OP_INT64)
    ADD_INT(OP_FLOAT64)
    ADD_INT(OP_UUID)
    ADD_INT(OP_STRING)
    ADD_INT(OP_BYTES)
    ADD_INT(OP_STRUCT)
    ADD_INT(OP_ARRAY)
    ADD_INT(LEN_INT16)
    ADD_INT(LEN_INT32)
    ADD_INT(LEN_COMPACT)
    ADD_INT(DEF_CONST)
    ADD_INT(DEF_LIST)
    ADD_INT(DEF_CALL)
#undef ADD_INT
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
