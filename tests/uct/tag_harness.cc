#include "tag_harness.h"

#include "base/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>

namespace uct_tm_test {

uint64_t test_seed() {
    static const uint64_t seed = [] {
        uint64_t    value = 0x5eed5eedull;
        const char *env   = getenv("TM_TEST_SEED");
        if ((env != nullptr) && (*env != '\0')) {
            value = strtoull(env, nullptr, 0);
        }
        fprintf(stderr, "[uct-tm tests] seed %" PRIu64 " (set TM_TEST_SEED to replay)\n", value);
        return value;
    }();
    return seed;
}

namespace {

ucs_status_t ignore_eager(void *, void *, size_t, unsigned, uct_tag_t, uint64_t, void **) {
    return UCS_OK;
}
ucs_status_t ignore_rndv(void *, unsigned, uint64_t, const void *, unsigned, uint64_t, size_t,
                         const void *) {
    return UCS_OK;
}

std::vector<std::string> probe_tag_transports() {
    std::vector<std::string> found;
    try {
        for (const std::string &tl : tm_transports()) {
            UctEnv env(tl);
            uct_iface_params_t params = {};
            params.field_mask = UCT_IFACE_PARAM_FIELD_FEATURES | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB |
                                UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB;
            params.features = UCT_IFACE_FEATURE_TAG | UCT_IFACE_FEATURE_AM;
            params.eager_cb = ignore_eager;
            params.rndv_cb  = ignore_rndv;
            uct_iface_h iface;
            if (env.open_iface(tl, params, &iface) != UCS_OK) {
                continue;
            }
            uct_iface_attr_t attr;
            if ((uct_iface_query(iface, &attr) == UCS_OK) &&
                (attr.cap.flags & (UCT_IFACE_FLAG_TAG_EAGER_SHORT | UCT_IFACE_FLAG_TAG_EAGER_BCOPY |
                                   UCT_IFACE_FLAG_TAG_EAGER_ZCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY))) {
                found.push_back(tl);
            }
            uct_iface_close(iface);
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "[uct-tm tests] no tag transports: %s\n", e.what());
    }
    return found;
}

}  // namespace

/* Probed once a process: every suite's instantiation asks, and each probe opens an
 * iface of every transport (half a second per round in the emulated verbs guest). */
std::vector<std::string> tag_transports() {
    static const std::vector<std::string> found = probe_tag_transports();
    return found;
}

bool connects_to_iface(const std::string &tl) {
    try {
        UctEnv             env(tl);
        uct_iface_params_t params = {};
        params.field_mask         = UCT_IFACE_PARAM_FIELD_FEATURES;
        params.features           = UCT_IFACE_FEATURE_AM;
        uct_iface_h iface;
        if (env.open_iface(tl, params, &iface) != UCS_OK) {
            return false;
        }
        uct_iface_attr_t attr;
        const bool       yes = (uct_iface_query(iface, &attr) == UCS_OK) &&
                         (attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
        uct_iface_close(iface);
        return yes;
    } catch (const std::exception &) {
        return false;
    }
}

/* ---- payloads ---------------------------------------------------------------------------- */

void fill_pattern(void *dst, size_t length, uint64_t seed, size_t offset) {
    auto *p = static_cast<uint8_t *>(dst);
    for (size_t i = 0; i < length; ++i) {
        p[i] = pattern_byte(seed, offset + i);
    }
}

size_t pattern_mismatch(const void *data, size_t length, uint64_t seed, size_t offset) {
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < length; ++i) {
        if (p[i] != pattern_byte(seed, offset + i)) {
            return i;
        }
    }
    return SIZE_MAX;
}

void GuardedBuffer::resize(size_t size) {
    size_ = size;
    storage_.assign(size + 2 * kGuard, static_cast<char>(kFill));
}

bool GuardedBuffer::guards_intact() const {
    constexpr char fill = static_cast<char>(kFill);
    return std::all_of(storage_.begin(), storage_.begin() + kGuard,
                       [](char c) { return c == fill; }) &&
           std::all_of(storage_.end() - kGuard, storage_.end(), [](char c) { return c == fill; });
}

bool GuardedBuffer::untouched(size_t from, size_t to) const {
    constexpr char fill = static_cast<char>(kFill);
    return std::all_of(data() + from, data() + to, [](char c) { return c == fill; });
}

/* ---- posted receives ----------------------------------------------------------------------- */

namespace {

void consumed_cb(uct_tag_context_t *self) {
    RecvCtx *r = RecvCtx::of(self);
    r->events.push_back(RecvCtx::kConsumed);
    if (r->on_consumed) {
        r->on_consumed(*r);
    }
}

void completed_cb(uct_tag_context_t *self, uct_tag_t stag, uint64_t imm, size_t length,
                  void *inline_data, ucs_status_t status) {
    RecvCtx *r = RecvCtx::of(self);
    r->events.push_back(RecvCtx::kCompleted);
    r->stag        = stag;
    r->imm         = imm;
    r->length      = length;
    r->status      = status;
    r->inline_data = (inline_data != nullptr);
    if (r->on_done) {
        r->on_done(*r);
    }
}

void rndv_recv_cb(uct_tag_context_t *self, uct_tag_t stag, const void *header,
                  unsigned header_length, ucs_status_t status, unsigned flags) {
    RecvCtx *r = RecvCtx::of(self);
    r->events.push_back(RecvCtx::kRndv);
    r->stag       = stag;
    r->status     = status;
    r->rndv_flags = flags;
    r->header.assign(static_cast<const char *>(header), header_length);
    if (r->on_done) {
        r->on_done(*r);
    }
}

}  // namespace

RecvCtx::RecvCtx() { reset(); }

void RecvCtx::reset() {
    memset(&ctx, 0, sizeof(ctx));
    ctx.tag_consumed_cb = consumed_cb;
    ctx.completed_cb    = completed_cb;
    ctx.rndv_cb         = rndv_recv_cb;
    events.clear();
    stag        = 0;
    imm         = 0;
    length      = 0;
    status      = UCS_INPROGRESS;
    inline_data = false;
    header.clear();
    rndv_flags = 0;
}

int RecvCtx::count(Event e) const {
    return static_cast<int>(std::count(events.begin(), events.end(), e));
}

std::string RecvCtx::sequence() const {
    static const char *names[] = {"consumed", "completed", "rndv"};
    std::string        s;
    for (Event e : events) {
        s += (s.empty() ? "" : ",");
        s += names[e];
    }
    return s;
}

RecvBuffers::RecvBuffers(size_t capacity, size_t iovcnt) {
    iovcnt = std::max<size_t>(iovcnt, 1);
    pieces.resize(iovcnt);
    size_t left = capacity;
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t n = (i + 1 == iovcnt) ? left : (left + (iovcnt - i) - 1) / (iovcnt - i);
        pieces[i].resize(n);
        left -= n;
    }
    for (GuardedBuffer &p : pieces) {
        uct_iov_t v = {};
        v.buffer    = p.data();
        v.length    = p.size();
        v.count     = 1;
        iov.push_back(v);
    }
}

size_t RecvBuffers::capacity() const {
    size_t total = 0;
    for (const GuardedBuffer &p : pieces) {
        total += p.size();
    }
    return total;
}

std::string RecvBuffers::check(uint64_t seed, size_t length) const {
    size_t offset = 0;
    char   what[160];
    for (size_t i = 0; i < pieces.size(); ++i) {
        const GuardedBuffer &p     = pieces[i];
        const size_t         n     = (offset < length) ? std::min(p.size(), length - offset) : 0;
        const size_t         wrong = pattern_mismatch(p.data(), n, seed, offset);
        if (wrong != SIZE_MAX) {
            snprintf(what, sizeof(what), "iov[%zu]: message byte %zu wrong", i, offset + wrong);
            return what;
        }
        if (!p.untouched(n, p.size())) {
            snprintf(what, sizeof(what), "iov[%zu]: bytes after the %zu delivered were written",
                     i, n);
            return what;
        }
        if (!p.guards_intact()) {
            snprintf(what, sizeof(what), "iov[%zu]: guard region around the buffer was written", i);
            return what;
        }
        offset += p.size();
    }
    return "";
}

bool RecvBuffers::untouched() const {
    return std::all_of(pieces.begin(), pieces.end(), [](const GuardedBuffer &p) {
        return p.untouched(0, p.size()) && p.guards_intact();
    });
}

/* ---- unexpected arrivals ---------------------------------------------------------------------- */

ucs_status_t Unexpected::eager_cb(void *arg, void *data, size_t length, unsigned flags,
                                  uct_tag_t stag, uint64_t imm, void **context) {
    auto *self = static_cast<Unexpected *>(arg);
    ++self->fragments;
    char what[200];
    if (context == nullptr) {
        self->violations.push_back("eager_cb without a context pointer");
        return UCS_OK;
    }
    size_t index;
    if (flags & UCT_CB_PARAM_FLAG_FIRST) {
        if (self->open_ > 0) {
            self->violations.push_back("FIRST fragment while another message is incomplete");
        }
        index = self->messages.size();
        self->messages.emplace_back();
        self->messages.back().tag = stag;
        /* Our per-message token; must come back unchanged. */
        *context = reinterpret_cast<void *>(index + 1);
        ++self->open_;
    } else {
        index = reinterpret_cast<uintptr_t>(*context) - 1;
        if ((*context == nullptr) || (index >= self->messages.size()) ||
            self->messages[index].complete) {
            snprintf(what, sizeof(what), "fragment without FIRST got context %p", *context);
            self->violations.push_back(what);
            return UCS_OK;
        }
        if (self->messages[index].tag != stag) {
            self->violations.push_back("fragment tag differs from the first fragment's");
        }
    }
    Message &m = self->messages[index];
    m.flags.push_back(flags);
    m.data.append(static_cast<const char *>(data), length);
    if ((flags & UCT_CB_PARAM_FLAG_MORE) && (imm != 0)) {
        self->violations.push_back("imm on a fragment that is not the last");
    }
    if (flags & UCT_CB_PARAM_FLAG_DESC) {
        ++self->desc_fragments;
        self->desc_data.push_back(data);
    }
    if (!(flags & UCT_CB_PARAM_FLAG_MORE)) {
        m.imm      = imm;
        m.complete = true;
        --self->open_;
    }
    ucs_status_t status = UCS_OK;
    if ((flags & UCT_CB_PARAM_FLAG_DESC) && (self->held.size() < self->hold_max_)) {
        /* Keep it: write our own header into the requested headroom, as
         * UCP does with its receive descriptor. */
        Held h;
        h.desc          = static_cast<char *>(data) - self->rx_headroom_;
        h.data          = static_cast<char *>(data);
        h.content.assign(static_cast<const char *>(data), length);
        h.headroom_seed = 0x4eadull + self->held.size();
        fill_pattern(h.desc, self->rx_headroom_, h.headroom_seed);
        self->held.push_back(std::move(h));
        status = UCS_INPROGRESS;
    }
    if (m.complete && self->on_message) {
        self->on_message(index);
    }
    return status;
}

ucs_status_t Unexpected::rndv_cb(void *arg, unsigned flags, uint64_t stag, const void *header,
                                 unsigned header_length, uint64_t remote_addr, size_t length,
                                 const void *rkey_buf) {
    auto *self = static_cast<Unexpected *>(arg);
    Rndv  r;
    r.flags       = flags;
    r.tag         = stag;
    r.header.assign(static_cast<const char *>(header), header_length);
    r.remote_addr = remote_addr;
    r.length      = length;
    if (rkey_buf != nullptr) {
        r.rkey.assign(static_cast<const char *>(rkey_buf), self->rkey_size_);
    }
    self->rndvs.push_back(std::move(r));
    if (self->on_rndv) {
        self->on_rndv(self->rndvs.size() - 1);
    }
    return UCS_OK;
}

size_t Unexpected::complete_messages() const {
    return static_cast<size_t>(std::count_if(messages.begin(), messages.end(),
                                             [](const Message &m) { return m.complete; }));
}

std::string Unexpected::check_held() const {
    for (size_t i = 0; i < held.size(); ++i) {
        const Held &h = held[i];
        if (memcmp(h.data, h.content.data(), h.content.size()) != 0) {
            return "held descriptor " + std::to_string(i) + ": data changed while held";
        }
        if (pattern_mismatch(h.desc, rx_headroom_, h.headroom_seed) != SIZE_MAX) {
            return "held descriptor " + std::to_string(i) + ": headroom changed while held";
        }
    }
    return "";
}

void Unexpected::release_held() {
    for (const Held &h : held) {
        uct_iface_release_desc(h.desc);
    }
    held.clear();
}

/* ---- waiting ---------------------------------------------------------------------------------- */

bool wait_for(const std::function<bool()> &done, const std::function<void()> &progress,
              double seconds) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds));
    for (unsigned i = 0;; ++i) {
        if (done()) {
            return true;
        }
        if (((i & 63) == 0) && (std::chrono::steady_clock::now() > deadline)) {
            return done();
        }
        progress();
    }
}

Completion::Completion(int count) {
    comp.func   = cb;
    comp.count  = count;
    comp.status = UCS_OK;
}

void Completion::cb(uct_completion_t *self) {
    auto *c = reinterpret_cast<Completion *>(self);
    ++c->calls;
    c->status = self->status;
}

ucs_status_t ErrorLog::handler(void *arg, uct_ep_h ep, ucs_status_t status) {
    static_cast<ErrorLog *>(arg)->entries.push_back(Entry{ep, status});
    return UCS_OK;
}

int ErrorLog::count(uct_ep_h ep) const {
    return static_cast<int>(std::count_if(entries.begin(), entries.end(),
                                          [ep](const Entry &e) { return e.ep == ep; }));
}

/* ---- sending ------------------------------------------------------------------------------------ */

const char *path_name(Path path) {
    switch (path) {
    case Path::kShort: return "eager_short";
    case Path::kBcopy: return "eager_bcopy";
    case Path::kZcopy: return "eager_zcopy";
    case Path::kZcopyMulti: return "eager_zcopy_multi";
    case Path::kRndv: return "rndv_zcopy";
    }
    return "?";
}

uint64_t path_flag(Path path) {
    switch (path) {
    case Path::kShort: return UCT_IFACE_FLAG_TAG_EAGER_SHORT;
    case Path::kBcopy: return UCT_IFACE_FLAG_TAG_EAGER_BCOPY;
    case Path::kZcopy:
    case Path::kZcopyMulti: return UCT_IFACE_FLAG_TAG_EAGER_ZCOPY;
    case Path::kRndv: return UCT_IFACE_FLAG_TAG_RNDV_ZCOPY;
    }
    return 0;
}

Caps Caps::of(const uct_iface_attr_t &attr) {
    Caps c;
    c.flags                = attr.cap.flags;
    c.max_short            = attr.cap.tag.eager.max_short;
    c.max_bcopy            = attr.cap.tag.eager.max_bcopy;
    c.max_zcopy            = attr.cap.tag.eager.max_zcopy;
    c.eager_max_iov        = attr.cap.tag.eager.max_iov;
    c.rndv_max_zcopy       = attr.cap.tag.rndv.max_zcopy;
    c.rndv_max_hdr         = attr.cap.tag.rndv.max_hdr;
    c.rndv_max_iov         = attr.cap.tag.rndv.max_iov;
    c.recv_max_iov         = attr.cap.tag.recv.max_iov;
    c.recv_max_outstanding = attr.cap.tag.recv.max_outstanding;
    /* One descriptor or message of the transport: a bcopy may go beyond it in
     * fragments (tm_sm's BCOPY_MAX), an active-message zcopy never does. */
    c.zcopy_single         = std::min({c.max_zcopy, c.max_bcopy, attr.cap.am.max_zcopy});
    return c;
}

bool Caps::has(Path path) const {
    if (!(flags & path_flag(path))) {
        return false;
    }
    /* Multi-fragment zcopy exists only where zcopy goes beyond one fragment. */
    return (path != Path::kZcopyMulti) || (max_zcopy > zcopy_single);
}

std::vector<size_t> Caps::sizes(Path path) const {
    std::vector<size_t> s;
    switch (path) {
    case Path::kShort:
        s = {0, 1, 8, max_short / 2 + 3, max_short};
        break;
    case Path::kBcopy:
        s = {0, 1, 100, zcopy_single, zcopy_single + 1, max_bcopy / 2 + 7, max_bcopy};
        break;
    case Path::kZcopy:
        s = {1, 100, zcopy_single / 3 + 5, zcopy_single};
        break;
    case Path::kZcopyMulti:
        s = {zcopy_single + 1, 2 * zcopy_single + 333, max_zcopy - 1, max_zcopy};
        break;
    case Path::kRndv:
        s = {1, 1000, 65536 + 3, 1u << 20};
        break;
    }
    std::vector<size_t> out;
    for (size_t v : s) {
        if (((v <= 4096) || (path != Path::kShort)) && ((path != Path::kBcopy) || (v <= max_bcopy))) {
            if (std::find(out.begin(), out.end(), v) == out.end()) {
                out.push_back(v);
            }
        }
    }
    return out;
}

std::vector<uct_iov_t> split_iov(const void *data, size_t length, size_t iovcnt) {
    std::vector<uct_iov_t> iov;
    size_t                 offset = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t n = (i + 1 == iovcnt) ? (length - offset)
                                           : std::min(length - offset, length / iovcnt + i);
        uct_iov_t v = {};
        v.buffer    = const_cast<char *>(static_cast<const char *>(data)) + offset;
        v.length    = n;
        v.count     = 1;
        iov.push_back(v);
        offset += n;
    }
    return iov;
}

namespace {

struct PackArg {
    const char *data;
    size_t      length;
};

size_t pack_payload(void *dest, void *arg) {
    auto *a = static_cast<PackArg *>(arg);
    if (a->length != 0) { /* an empty payload's data may be null */
        memcpy(dest, a->data, a->length);
    }
    return a->length;
}

}  // namespace

Send::Send(Path p, uct_tag_t t, uint64_t i, uint64_t s, size_t length, size_t iov)
    : path(p), tag(t), imm((p == Path::kShort || p == Path::kRndv) ? 0 : i), seed(s),
      payload(length), iovcnt(std::max<size_t>(iov, 1)) {
    fill_pattern(payload.data(), length, seed);
    if (path == Path::kRndv) {
        header = "rndv-header:" + std::to_string(seed);
    }
}

ucs_status_t Send::post(uct_ep_h ep) {
    switch (path) {
    case Path::kShort:
        return uct_ep_tag_eager_short(ep, tag, payload.data(), payload.size());
    case Path::kBcopy: {
        PackArg       arg = {payload.data(), payload.size()};
        const ssize_t n   = uct_ep_tag_eager_bcopy(ep, tag, imm, pack_payload, &arg, 0);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        return (static_cast<size_t>(n) == payload.size()) ? UCS_OK : UCS_ERR_IO_ERROR;
    }
    case Path::kZcopy:
    case Path::kZcopyMulti: {
        comp.reset(new Completion());
        auto               iov    = split_iov(payload.data(), payload.size(), iovcnt);
        const ucs_status_t status = uct_ep_tag_eager_zcopy(ep, tag, imm, iov.data(), iov.size(),
                                                           0, &comp->comp);
        comp_pending = (status == UCS_INPROGRESS);
        return comp_pending ? UCS_OK : status;
    }
    case Path::kRndv: {
        comp.reset(new Completion());
        auto                   iov = split_iov(payload.data(), payload.size(), 1);
        const ucs_status_ptr_t op  = uct_ep_tag_rndv_zcopy(
            ep, tag, header.data(), static_cast<unsigned>(header.size()), iov.data(), 1, 0,
            &comp->comp);
        if (UCS_PTR_IS_ERR(op)) {
            return UCS_PTR_STATUS(op);
        }
        rndv_op      = op;
        comp_pending = true;
        return UCS_OK;
    }
    }
    return UCS_ERR_INVALID_PARAM;
}

Node::Node(UctEnv &env, const std::string &tl, const Settings &settings, size_t rx_headroom)
    : unexp(rx_headroom) {
    uct_md_attr_t md_attr;
    if (uct_md_query(env.md(), &md_attr) == UCS_OK) {
        unexp.set_rkey_size(md_attr.rkey_packed_size);
    }
    uct_iface_params_t params = {};
    params.field_mask = UCT_IFACE_PARAM_FIELD_FEATURES | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG | UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG | UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.features = UCT_IFACE_FEATURE_TAG | UCT_IFACE_FEATURE_AM | UCT_IFACE_FEATURE_GET |
                      UCT_IFACE_FEATURE_PUT;
    params.eager_cb          = Unexpected::eager_cb;
    params.eager_arg         = &unexp;
    params.rndv_cb           = Unexpected::rndv_cb;
    params.rndv_arg          = &unexp;
    params.rx_headroom       = rx_headroom;
    params.err_handler       = ErrorLog::handler;
    params.err_handler_arg   = &errors;
    params.err_handler_flags = UCT_CB_FLAG_ASYNC;
    status = env.open_iface(tl, params, &iface, settings);
    if (status != UCS_OK) {
        iface = nullptr;
        return;
    }
    status = uct_iface_query(iface, &attr);
    caps   = Caps::of(attr);
}

Node::~Node() {
    release_held_descs();
    shm_note_held(); /* what the iface held goes with it: remember it was ours */
    if (iface != nullptr) {
        uct_iface_close(iface);
    }
}

void Node::release_held_descs() { unexp.release_held(); }

std::string Node::address() const {
    std::string dev(attr.device_addr_len, '\0'), ifa(attr.iface_addr_len, '\0');
    uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t *>(&dev[0]));
    uct_iface_get_address(iface, reinterpret_cast<uct_iface_addr_t *>(&ifa[0]));
    return dev + ifa;
}

ucs_status_t Node::connect(const std::string &remote, uct_ep_h *ep) const {
    if (remote.size() != attr.device_addr_len + attr.iface_addr_len) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ep_params_t p = {};
    p.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                   UCT_EP_PARAM_FIELD_IFACE_ADDR;
    p.iface      = iface;
    p.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(remote.data());
    p.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(remote.data() + attr.device_addr_len);
    return uct_ep_create(&p, ep);
}

ucs_status_t Node::connect_pair(const Node &peer, uct_ep_h *ep, uct_ep_h *peer_ep) const {
    *peer_ep = nullptr;
    if (attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        return connect(peer.address(), ep);
    }
    if (!(attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP)) {
        return UCS_ERR_UNSUPPORTED;
    }
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
    p.iface           = iface;
    ucs_status_t status = uct_ep_create(&p, ep);
    if (status != UCS_OK) {
        return status;
    }
    p.iface = peer.iface;
    status  = uct_ep_create(&p, peer_ep);
    if (status != UCS_OK) {
        uct_ep_destroy(*ep);
        *ep = nullptr;
        return status;
    }
    std::string ep_addr(attr.ep_addr_len, '\0'), peer_ep_addr(peer.attr.ep_addr_len, '\0');
    std::string dev(attr.device_addr_len, '\0'), peer_dev(peer.attr.device_addr_len, '\0');
    uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t *>(&dev[0]));
    uct_iface_get_device_address(peer.iface, reinterpret_cast<uct_device_addr_t *>(&peer_dev[0]));
    status = uct_ep_get_address(*ep, reinterpret_cast<uct_ep_addr_t *>(&ep_addr[0]));
    if (status == UCS_OK) {
        status = uct_ep_get_address(*peer_ep, reinterpret_cast<uct_ep_addr_t *>(&peer_ep_addr[0]));
    }
    if (status == UCS_OK) {
        status = uct_ep_connect_to_ep(*ep, reinterpret_cast<const uct_device_addr_t *>(peer_dev.data()),
                                      reinterpret_cast<const uct_ep_addr_t *>(peer_ep_addr.data()));
    }
    if (status == UCS_OK) {
        status = uct_ep_connect_to_ep(*peer_ep, reinterpret_cast<const uct_device_addr_t *>(dev.data()),
                                      reinterpret_cast<const uct_ep_addr_t *>(ep_addr.data()));
    }
    if (status != UCS_OK) {
        uct_ep_destroy(*ep);
        uct_ep_destroy(*peer_ep);
        *ep      = nullptr;
        *peer_ep = nullptr;
    }
    return status;
}

namespace {

ucs_status_t log_am(void *arg, void *data, size_t length, unsigned) {
    static_cast<std::vector<std::string> *>(arg)->emplace_back(static_cast<const char *>(data),
                                                                length);
    return UCS_OK;
}

}  // namespace

ucs_status_t Node::set_am_log(uint8_t id, std::vector<std::string> *log) {
    return uct_iface_set_am_handler(iface, id, log_am, log, 0 /* synchronous */);
}

uct_allocated_memory_t md_alloc(uct_md_h md, size_t length, ucs_status_t *status) {
    const uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_md_h                 mds[]  = {md};
    uct_mem_alloc_params_t   params = {};
    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE;
    params.mds.mds    = mds;
    params.mds.count  = 1;
    params.mem_type   = UCS_MEMORY_TYPE_HOST;
    uct_allocated_memory_t mem = {};
    *status = uct_mem_alloc(length, &method, 1, &params, &mem);
    return mem;
}

std::vector<std::string> shm_leftovers() {
    std::vector<std::string> names;
    DIR                     *dir = opendir("/dev/shm");
    if (dir == nullptr) {
        return names;
    }
    while (struct dirent *entry = readdir(dir)) {
        uint32_t uid;
        if (uct_tm::shm_named_file(entry->d_name, &uid)) {
            names.emplace_back(entry->d_name);
        }
    }
    closedir(dir);
    return names;
}

namespace {

/* The /dev/shm entries this process has open or mapped, from one pass over
 * its descriptors and one over its mappings. */
std::set<std::string> held_by_this_process() {
    static constexpr char kDir[] = "/dev/shm/";
    std::set<std::string> held;
    /* "/dev/shm/<name>" at `path`, maybe followed by " (deleted)" or a newline. */
    const auto take = [&](const char *path) {
        if ((path != nullptr) && (strncmp(path, kDir, sizeof(kDir) - 1) == 0)) {
            const char *name = path + sizeof(kDir) - 1;
            held.emplace(name, strcspn(name, " \n"));
        }
    };
    if (DIR *fds = opendir("/proc/self/fd")) {
        while (struct dirent *entry = readdir(fds)) {
            char          target[512];
            const ssize_t n = readlinkat(dirfd(fds), entry->d_name, target, sizeof(target) - 1);
            if (n > 0) {
                target[n] = '\0';
                take(target);
            }
        }
        closedir(fds);
    }
    if (FILE *maps = fopen("/proc/self/maps", "r")) {
        char line[1024];
        while (fgets(line, sizeof(line), maps) != nullptr) {
            take(strstr(line, kDir));
        }
        fclose(maps);
    }
    return held;
}

/* Another live process holds the segment's lock (or is creating it). */
bool owned_by_another_process(const std::string &name) {
    const int fd = open(("/dev/shm/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        return true; /* gone meanwhile: its owner removed it */
    }
    struct stat st;
    bool        other = flock(fd, LOCK_EX | LOCK_NB) != 0;
    if (!other && (fstat(fd, &st) == 0) && (st.st_size == 0) && (time(nullptr) - st.st_ctime < 5)) {
        other = true; /* just created: its creator locks it next */
    }
    close(fd); /* drops the lock if we took it */
    return other;
}

}  // namespace

std::vector<std::string> shm_leaked_since(const std::vector<std::string> &before) {
    std::vector<std::string>    leaked;
    const std::set<std::string> held = held_by_this_process();
    for (const std::string &name : shm_leftovers()) {
        if ((std::find(before.begin(), before.end(), name) == before.end()) &&
            ((held.count(name) > 0) || !owned_by_another_process(name))) {
            leaked.push_back(name);
        }
    }
    return leaked;
}

namespace {

/* Segment files this process was seen holding (shm_note_held). */
std::set<std::string> &held_ledger() {
    static std::set<std::string> names;
    return names;
}

}  // namespace

void shm_note_held() {
    const std::set<std::string> held = held_by_this_process();
    held_ledger().insert(held.begin(), held.end());
}

std::vector<std::string> shm_leaked_by_this_process(const std::vector<std::string> &before) {
    std::vector<std::string>    leaked;
    const std::set<std::string> held = held_by_this_process();
    for (const std::string &name : shm_leftovers()) {
        if ((std::find(before.begin(), before.end(), name) == before.end()) &&
            ((held_ledger().count(name) > 0) || (held.count(name) > 0))) {
            leaked.push_back(name);
        }
    }
    return leaked;
}

std::string capture_stderr(const std::function<void()> &f) {
    char path[] = "/tmp/uct_tm_stderr_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) {
        f();
        return {};
    }
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    f();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    std::string out;
    char        buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) {
        out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    unlink(path);
    return out;
}

}  // namespace uct_tm_test
