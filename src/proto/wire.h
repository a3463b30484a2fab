/*
 * Wire format of the protocol layer's active messages (one AM id; the first
 * byte says which header follows). Every header is read with memcpy (AM data
 * is not aligned) and every field is checked before use: a malformed message
 * is logged and dropped. Layout and meaning: docs/proto.md "Wire format".
 */
#ifndef UCT_TM_PROTO_WIRE_H_
#define UCT_TM_PROTO_WIRE_H_

#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace proto {

/* The AM ids the layer registers on every iface: kAmId carries every kind
 * below; kAmShortId carries small eager messages as one am_short: the 64-bit
 * AM header is the tag, then ShortHeader, then the payload. */
inline constexpr uint8_t kAmId      = 23;
inline constexpr uint8_t kAmShortId = 24;
/* The same as kAmShortId for an untagged message (its AM header, the tag, is 0). */
inline constexpr uint8_t kAmShortUntaggedId = 25;

struct ShortHeader {
    uint32_t source; /* source_word(): the sender's id and whether `data` is remote data */
    uint32_t data;   /* remote data (the message has no ShortHeader when it does not fit) */
};
static_assert(sizeof(ShortHeader) == 8, "ShortHeader is part of the wire format");

enum class Kind : uint8_t {
    kEager = 1,  /* MsgHeader + the whole payload */
    kFirst,      /* MsgHeader + the first fragment of a longer eager message */
    kMiddle,     /* FragHeader + a further fragment */
    kRts,        /* MsgHeader, no payload: rendezvous request */
    kData,       /* DataHeader + rendezvous payload pushed after a CTS */
    kCts,        /* CtrlHeader: receiver matched an RTS, send `value2` bytes to `value` */
    kAck,        /* CtrlHeader: sync message matched or discarded, or rendezvous done */
    kCancel,     /* CtrlHeader: sender withdraws rendezvous request `req` */
    kCancelAck,  /* CtrlHeader: `status` CANCELED if the withdrawal won */
    kCredit,     /* CtrlHeader: `value` bytes of eager credit returned */
    kPutReq,     /* PutHeader + rkey: write the first `length` bytes into the receiver's buffer */
    kPutDone,    /* CtrlHeader: the sender's write for receive `req` is done */
    kDeliverReq, /* CtrlHeader: answer kAck to `req` (after everything sent before it) */
    kBatch,      /* BatchHeader, then (BatchEntry + payload)...: eager messages sent with MORE */
    kHello,      /* HelloHeader + the sender's compact worker address: reply over it */
    kLast = kHello
};

enum MsgFlags : uint8_t {
    kFlagSync = 1, /* the sender waits for kAck */
    kFlagGet  = 2, /* kRts: a RndvGet and the packed rkey follow; the receiver reads the data */
    kFlagData = 4, /* `data` is remote data (UCT_TM_PROTO_SEND_REMOTE_DATA) */
    kFlagUntagged =
        8, /* untagged (UCT_TM_PROTO_OP_UNTAGGED): `tag` is 0, untagged receives take it */
    /* kRts without kFlagGet: the sender cannot be read (a vector) but can
     * write: a receive with one buffer may ask for all of it with kPutReq */
    kFlagPut = 16,
    /* kEager, kFirst (DELIVERY_COMPLETE over AM): the receiver sends kAck once
     * the whole message is in (matched or buffered), before it reports it */
    kFlagDeliver = 32
};

/* Eager, first fragment and rendezvous request. */
struct MsgHeader {
    Kind     kind;
    uint8_t  flags;
    uint16_t reserved;
    uint32_t source;  /* sending worker id */
    uint64_t tag;
    uint64_t data;    /* remote data, with kFlagData */
    uint64_t length;  /* the whole message */
    uint64_t sreq;    /* sender's request (sync, rendezvous), for replies */
    uint32_t msg_id;  /* kFirst: key of the following fragments */
    uint32_t reserved2;
};
static_assert(sizeof(MsgHeader) == 48, "MsgHeader is part of the wire format");

/* Worker ids are below 2^31: where a message has no MsgHeader -- a
 * ShortHeader, or the 64-bit imm of a transport's tagged eager message
 * (source word << 32 | data) -- the top bit of the source word says the
 * 32-bit data is remote data. Remote data wider than 32 bits goes in a
 * MsgHeader (an AM eager message; a rendezvous request over a tag list). */
inline constexpr uint32_t kMaxWorkerId = 0x7fffffffu;
inline constexpr uint32_t kSourceData  = 0x80000000u;

inline constexpr uint32_t source_word(uint32_t id, bool has_data) {
    return has_data ? (id | kSourceData) : id;
}
inline constexpr uint32_t word_source(uint32_t word) { return word & kMaxWorkerId; }
inline constexpr bool     word_has_data(uint32_t word) { return (word & kSourceData) != 0; }
/* A tagged eager message's imm: the source word, then 32 bits of data. */
inline constexpr uint32_t imm_source(uint64_t imm) { return word_source(static_cast<uint32_t>(imm >> 32)); }
inline constexpr bool     imm_has_data(uint64_t imm) { return (imm >> 63) != 0; }
/* Remote data fits the 32 bits beside the source word. */
inline constexpr bool     data_is_narrow(uint64_t data) { return (data >> 32) == 0; }

/* After a kRts MsgHeader with kFlagGet: where the data is, then `rkey_length`
 * bytes of the sender MD's packed rkey. The receiver reads the data with
 * get_zcopy and answers kAck. */
struct RndvGet {
    uint64_t address;
    uint16_t rkey_length;
    uint8_t  reserved[6];
};
static_assert(sizeof(RndvGet) == 16, "RndvGet is part of the wire format");
inline constexpr size_t kMaxRkey = 256;

/* Split rendezvous: while the receiver reads the back of the message, the
 * sender writes the front [0, length) into the receiver's registered buffer. */
struct PutHeader {
    Kind     kind;
    uint8_t  reserved[3];
    uint32_t source;
    uint64_t sreq;
    uint64_t rreq;
    uint64_t address;
    uint64_t length;
    uint16_t rkey_length;
    uint8_t  reserved2[6];
};
static_assert(sizeof(PutHeader) == 48, "PutHeader is part of the wire format");

/* Rendezvous messages of at least this many bytes are copied by both sides. */
inline constexpr size_t kSplitMin = 64 << 10;

struct FragHeader {
    Kind     kind;
    uint8_t  reserved[3];
    uint32_t source;
    uint32_t msg_id;
    uint32_t reserved2;
    uint64_t offset;
};
static_assert(sizeof(FragHeader) == 24, "FragHeader is part of the wire format");

struct DataHeader {
    Kind     kind;
    uint8_t  reserved[3];
    uint32_t source; /* sending worker id: only the rendezvous's sender may fill the receive */
    uint64_t rreq;   /* receiver's request from the CTS */
    uint64_t offset;
};
static_assert(sizeof(DataHeader) == 24, "DataHeader is part of the wire format");

struct CtrlHeader {
    Kind     kind;
    uint8_t  reserved;
    int16_t  status;
    uint32_t source;
    uint64_t req;
    uint64_t value;
    uint64_t value2;
};
static_assert(sizeof(CtrlHeader) == 32, "CtrlHeader is part of the wire format");
/* Small eager messages a sender batched (UCT_TM_PROTO_SEND_MORE), in sending
 * order: each a BatchEntry and its `length` payload bytes. */
struct BatchHeader {
    Kind     kind;
    uint8_t  reserved[3];
    uint32_t source;
};
static_assert(sizeof(BatchHeader) == 8, "BatchHeader is part of the wire format");
struct BatchEntry {
    uint64_t tag;
    uint64_t data;   /* remote data, with kFlagData */
    uint32_t length;
    uint8_t  flags;  /* kFlagData and kFlagUntagged only */
    uint8_t  reserved[3];
};
static_assert(sizeof(BatchEntry) == 24, "BatchEntry is part of the wire format");

/* The first message of an endpoint over a transport that connects to
 * ifaces: the sender's worker address, so that a receiver that holds no
 * endpoint to it can create one for its replies (CTS, ACK, credit). */
struct HelloHeader {
    Kind     kind;
    uint8_t  reserved[3];
    uint32_t source;
    uint32_t target; /* the worker the sender's endpoint goes to */
    uint32_t length; /* address bytes that follow */
};
static_assert(sizeof(HelloHeader) == 16, "HelloHeader is part of the wire format");
inline constexpr size_t kMaxHelloAddress = 1024;

/* Every header carries the sending worker's id at this offset (MsgHeader,
 * FragHeader, DataHeader, PutHeader, CtrlHeader, BatchHeader, HelloHeader): one check binds any
 * message to the endpoint its claimed source was wired up with. */
inline constexpr size_t kSourceOffset = 4;

static_assert((offsetof(MsgHeader, source) == kSourceOffset) &&
                  (offsetof(FragHeader, source) == kSourceOffset) &&
                  (offsetof(DataHeader, source) == kSourceOffset) &&
                  (offsetof(PutHeader, source) == kSourceOffset) &&
                  (offsetof(CtrlHeader, source) == kSourceOffset) &&
                  (offsetof(BatchHeader, source) == kSourceOffset) &&
                  (offsetof(HelloHeader, source) == kSourceOffset),
              "every AM header has the source at kSourceOffset");

/* Version 2: DataHeader carries the source. Version 3: 64-bit remote data
 * (MsgHeader 48 bytes), worker ids below 2^31. Version 4: untagged messages
 * (kFlagUntagged, kAmShortUntaggedId), which a version 3 peer would take
 * for tagged ones. Version 5: kFlagDeliver, which a version 4 receiver
 * would not acknowledge. */
inline constexpr uint16_t kAddressVersion = 5;

/* Worker address: AddressHeader, then per iface: uint8 tl name length, the
 * name, uint16 device address length, it, uint16 iface address length, it. */
inline constexpr uint32_t kAddressMagic = 0x746d7072; /* "tmpr" */
enum AddressFlags : uint8_t {
    kAddrOffload = 1 /* receives go to the transport's tag list: send data with the tag API */
};
struct AddressHeader {
    uint32_t magic;
    uint16_t version;
    uint8_t  ifaces;
    uint8_t  flags;
    uint32_t id;
    uint32_t window; /* eager bytes this worker buffers per peer */
};
static_assert(sizeof(AddressHeader) == 16, "AddressHeader is part of the wire format");

/* Endpoint address (uct_tm_proto_ep_address), for transports that connect
 * endpoint to endpoint (tm_rc): EpAddressHeader, the transport's name
 * (tl_len bytes), then uct_ep_get_address()'s bytes (ep_addr_len). It names
 * both workers, so a peer's address is accepted only by the endpoint to
 * that very peer. An endpoint over a connect-to-iface transport gives the
 * header and name with no endpoint bytes: connecting it checks them only. */
inline constexpr uint32_t kEpAddressMagic = 0x746d7065; /* "tmpe" */
struct EpAddressHeader {
    uint32_t magic;
    uint16_t version;     /* kAddressVersion */
    uint16_t ep_addr_len; /* bytes of the UCT endpoint address */
    uint32_t source;      /* the worker whose endpoint this is */
    uint32_t target;      /* the worker that endpoint goes to */
    uint8_t  tl_len;      /* bytes of the transport name */
    uint8_t  reserved[3];
};
static_assert(sizeof(EpAddressHeader) == 20, "EpAddressHeader is part of the wire format");

}  // namespace proto
}  // namespace uct_tm

#endif
