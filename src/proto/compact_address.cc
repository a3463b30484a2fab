/*
 * Compact worker addresses (compact_address.h).
 */
#include "compact_address.h"

#include <cstring>
#include <string>

namespace uct_tm {
namespace proto {

namespace {

/* Codes 1..N: part of the format, so names are only ever appended. */
const char *const kTransportCodes[] = {"tm_sm", "posix", "tcp",      "tm_rc",   "tm_dc",
                                       "sysv",  "self",  "rc_verbs", "rc_mlx5", "dc_mlx5"};
constexpr size_t  kCodes            = sizeof(kTransportCodes) / sizeof(kTransportCodes[0]);

uint8_t code_of(const char *name, size_t length) {
    for (size_t c = 0; c < kCodes; ++c) {
        if ((strlen(kTransportCodes[c]) == length) &&
            (memcmp(name, kTransportCodes[c], length) == 0)) {
            return static_cast<uint8_t>(c + 1);
        }
    }
    return 0;
}

void put_varint(uint32_t v, std::vector<uint8_t> *out) {
    while (v >= 0x80) {
        out->push_back(static_cast<uint8_t>(v | 0x80));
        v >>= 7;
    }
    out->push_back(static_cast<uint8_t>(v));
}

/* A bitmap of the non-zero bytes (bit i of byte i / 8), then those bytes. */
void put_sparse(const char *bytes, size_t n, std::vector<uint8_t> *out) {
    const size_t map = out->size();
    out->resize(map + (n + 7) / 8, 0);
    for (size_t i = 0; i < n; ++i) {
        if (bytes[i] != 0) {
            (*out)[map + i / 8] |= static_cast<uint8_t>(1u << (i % 8));
            out->push_back(static_cast<uint8_t>(bytes[i]));
        }
    }
}

/* Reads the compact form front to back; every read checks what is left. */
class Reader {
  public:
    Reader(const uint8_t *p, size_t n) : p_(p), end_(p + n) {}
    bool done() const { return p_ == end_; }
    bool byte(uint8_t *v) {
        if (p_ == end_) {
            return false;
        }
        *v = *p_++;
        return true;
    }
    bool varint(uint32_t *v) {
        uint64_t x = 0;
        for (unsigned shift = 0; shift < 35; shift += 7) {
            uint8_t b;
            if (!byte(&b)) {
                return false;
            }
            x |= uint64_t{b & 0x7fu} << shift;
            if ((b & 0x80) == 0) {
                *v = static_cast<uint32_t>(x);
                return x <= UINT32_MAX;
            }
        }
        return false;
    }
    bool bytes(size_t n, std::vector<char> *out) {
        if (static_cast<size_t>(end_ - p_) < n) {
            return false;
        }
        out->insert(out->end(), p_, p_ + n);
        p_ += n;
        return true;
    }
    /* put_sparse's bytes: `n` bytes of output, appended with a uint16 length */
    bool sparse(std::vector<char> *out) {
        uint8_t n;
        if (!byte(&n)) {
            return false;
        }
        const uint16_t len = n;
        out->insert(out->end(), reinterpret_cast<const char *>(&len),
                    reinterpret_cast<const char *>(&len) + sizeof(len));
        const size_t   map_len = (n + 7u) / 8u;
        const uint8_t *map     = p_;
        if (static_cast<size_t>(end_ - p_) < map_len) {
            return false;
        }
        p_ += map_len;
        for (size_t i = 0; i < n; ++i) {
            uint8_t v = 0;
            if (((map[i / 8] >> (i % 8)) & 1) && (!byte(&v) || (v == 0))) {
                return false; /* a byte marked non-zero is there, and is not zero */
            }
            out->push_back(static_cast<char>(v));
        }
        return true;
    }

  private:
    const uint8_t *p_;
    const uint8_t *end_;
};

uint16_t get16(const char *p) {
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

}  // namespace

bool compact_address(const std::vector<char> &full, std::vector<uint8_t> *out) {
    AddressHeader h;
    if (full.size() < sizeof(h)) {
        return false;
    }
    memcpy(&h, full.data(), sizeof(h));
    if ((h.ifaces > 15) || (h.flags > 15)) {
        return false;
    }
    out->clear();
    out->push_back(kCompactTag);
    out->push_back(static_cast<uint8_t>(h.ifaces | (h.flags << 4)));
    put_varint(h.id, out);
    put_varint(h.window, out);
    const char *p   = full.data() + sizeof(h);
    const char *end = full.data() + full.size();
    for (unsigned n = 0; n < h.ifaces; ++n) {
        if ((p == end) || (static_cast<size_t>(end - p) < 1u + static_cast<uint8_t>(*p))) {
            return false;
        }
        const size_t  tl_len = static_cast<uint8_t>(*p);
        const uint8_t code   = code_of(p + 1, tl_len);
        out->push_back(code);
        if (code == 0) {
            out->insert(out->end(), p, p + 1 + tl_len);
        }
        p += 1 + tl_len;
        for (int part = 0; part < 2; ++part) { /* device address, iface address */
            if (static_cast<size_t>(end - p) < 2) {
                return false;
            }
            const uint16_t len = get16(p);
            if ((len > UINT8_MAX) || (static_cast<size_t>(end - p) < 2u + len)) {
                return false;
            }
            out->push_back(static_cast<uint8_t>(len));
            put_sparse(p + 2, len, out);
            p += 2 + len;
        }
    }
    return p == end;
}

bool expand_address(const uint8_t *in, size_t length, std::vector<char> *out) {
    Reader        r(in, length);
    uint8_t       tag, counts;
    AddressHeader h = {};
    if (!r.byte(&tag) || (tag != kCompactTag) || !r.byte(&counts) || !r.varint(&h.id) ||
        !r.varint(&h.window)) {
        return false;
    }
    h.magic   = kAddressMagic;
    h.version = kAddressVersion;
    h.ifaces  = counts & 15;
    h.flags   = counts >> 4;
    out->assign(reinterpret_cast<const char *>(&h), reinterpret_cast<const char *>(&h) + sizeof(h));
    for (unsigned n = 0; n < h.ifaces; ++n) {
        uint8_t code;
        if (!r.byte(&code) || (code > kCodes)) {
            return false;
        }
        if (code != 0) {
            const char *name = kTransportCodes[code - 1];
            out->push_back(static_cast<char>(strlen(name)));
            out->insert(out->end(), name, name + strlen(name));
        } else {
            uint8_t tl_len;
            if (!r.byte(&tl_len)) {
                return false;
            }
            out->push_back(static_cast<char>(tl_len));
            if (!r.bytes(tl_len, out)) {
                return false;
            }
        }
        if (!r.sparse(out) || !r.sparse(out)) {
            return false;
        }
    }
    return r.done();
}

}  // namespace proto
}  // namespace uct_tm
