import Testing

@testable import MemwarnSystem

#if canImport(Glibc)
import Glibc
#endif

/// `memwarn soak`'s HTTP GET: which URLs it takes, and how it reads replies (a real exchange
/// runs in the soak's tests, against a real server).
@Suite struct HTTPGetTests {
    @Test func httpURLsAreParsedWithTheirPortAndPath() throws {
        #expect(try HTTPGet.Address.parse("http://127.0.0.1:8080/healthz").get() == .init(host: "127.0.0.1", port: 8080, path: "/healthz"))
        #expect(try HTTPGet.Address.parse("http://localhost").get() == .init(host: "localhost", port: 80, path: "/"))
        #expect(try HTTPGet.Address.parse("http://[::1]:9000/metrics?x=1").get() == .init(host: "::1", port: 9000, path: "/metrics?x=1"))
        #expect(try HTTPGet.Address.parse("http://[::1]:9000/").get().origin == "http://[::1]:9000")
        #expect(try HTTPGet.Address.parse("http://127.0.0.1:81/a").get().with(path: "/metrics").description == "http://127.0.0.1:81/metrics")
        #expect(try HTTPGet.Address.parse("http://localhost:81/").get().socketAddresses.map(\.family) == [AF_INET, AF_INET6], "localhost is both")
    }

    @Test(arguments: [
        "https://127.0.0.1/", "ftp://x/", "127.0.0.1:8080", "http://", "http://:80/", "http://localhost:0/", "http://localhost:99999/",
        "http://localhost:x/", "http://[::1/", "http://localhost/a b", "http://example.com/", "http://256.1.1.1/",
    ])
    func otherTextsAreRefusedWithAReason(text: String) {
        guard case .failure(let problem) = HTTPGet.Address.parse(text) else {
            Issue.record("\(text) was taken")
            return
        }
        #expect(!problem.description.isEmpty)
    }

    @Test func aReplysStatusAndBodyAreReadAndAnythingElseIsNotHTTP() throws {
        let address = HTTPGet.Address(host: "127.0.0.1", port: 1, path: "/")
        let reply = try HTTPGet.parse(Array("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\nbusy\r\n".utf8), address: address)
        #expect(reply.status == 503 && reply.body == "busy\r\n")
        #expect(try HTTPGet.parse(Array("HTTP/1.0 200 OK\r\n\r\n".utf8), address: address).body == "")
        for bad in ["", "SSH-2.0-OpenSSH\r\n", "HTTP/1.1 abc\r\n\r\n", "HTTP/2 200\r\n\r\n", "HTTP/1.1 999 Nope\r\n\r\n"] {
            #expect(throws: SystemError.self, "\(bad)") { try HTTPGet.parse(Array(bad.utf8), address: address) }
        }
    }
}
