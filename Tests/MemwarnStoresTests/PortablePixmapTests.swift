import MemwarnRelease
import MemwarnTestFixtures
import Testing

@testable import MemwarnStores

struct PortablePixmapTests {
    @Test func aPPMDecodesToExactRGBABytesWithOpaqueAlpha() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let colors: [[(red: UInt8, green: UInt8, blue: UInt8)]] = [
            [(255, 0, 0), (0, 255, 0), (0, 0, 255)],
            [(1, 2, 3), (250, 128, 7), (0, 0, 0)],
        ]
        let path = directory.file("small.ppm")
        try PortablePixmap.write(width: 3, height: 2, pixel: { x, y in colors[y][x] }, to: path)
        let image = try PortablePixmap.decode(file: path)
        #expect(image.width == 3 && image.height == 2)
        #expect(
            image.rgba == [
                255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 255,
                1, 2, 3, 255, 250, 128, 7, 255, 0, 0, 0, 255,
            ])
    }

    @Test func aPGMDecodesGrayIntoEqualRedGreenAndBlue() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let path = directory.file("small.pgm")
        try PortablePixmap.write(width: 2, height: 2, gray: { x, y in [[0, 128], [200, 255]][y][x] }, to: path)
        let image = try PortablePixmap.decode(file: path)
        #expect(image.width == 2 && image.height == 2)
        #expect(image.rgba == [0, 0, 0, 255, 128, 128, 128, 255, 200, 200, 200, 255, 255, 255, 255, 255])
    }

    @Test func commentsAndAnyWhitespaceBetweenHeaderFieldsAreSkipped() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let path = directory.write(
            "comments.ppm", header: "P6 # made by hand\n# a whole-line comment\r\n2\t# width\n  1 #height 9 9\n255\n",
            raster: [10, 20, 30, 40, 50, 60])
        #expect(try PortablePixmap.decode(file: path).rgba == [10, 20, 30, 255, 40, 50, 60, 255])
        let written = directory.file("written.pgm")
        try PortablePixmap.write(width: 1, height: 1, comment: "two\nlines", gray: { _, _ in 77 }, to: written)
        #expect(try PortablePixmap.decode(file: written).rgba == [77, 77, 77, 255])
    }

    @Test func aRasterByteThatLooksLikeACommentIsPixelData() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let hash = UInt8(ascii: "#")
        let newline = UInt8(ascii: "\n")
        let path = directory.write("hash.pgm", header: "P5\n3 1\n255\n", raster: [hash, newline, 32])
        #expect(try PortablePixmap.decode(file: path).rgba == [hash, hash, hash, 255, newline, newline, newline, 255, 32, 32, 32, 255])
    }

    @Test func samplesBelowAMaxvalOf255AreScaledToFullRange() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let path = directory.write("maxval15.pgm", header: "P5 3 1 15\n", raster: [0, 7, 15])
        #expect(try PortablePixmap.decode(file: path).rgba == [0, 0, 0, 255, 119, 119, 119, 255, 255, 255, 255, 255])
    }

    @Test func aBadMagicNumberIsATypedErrorNamingTheFile() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        for (name, bytes) in [("ascii.ppm", Array("P3\n1 1\n255\n0 0 0\n".utf8)), ("gif.ppm", Array("GIF89a".utf8)), ("empty.ppm", [])] {
            let path = directory.write(name, bytes)
            let error = #expect(throws: MediaError.self) { try PortablePixmap.decode(file: path) }
            #expect(error?.code == .badMagic)
            #expect(error?.path == path)
            #expect(error?.description.hasPrefix(path + ": ") == true)
        }
    }

    @Test func aTruncatedRasterIsATypedErrorNamingTheFile() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let path = directory.write("short.ppm", header: "P6\n2 2\n255\n", raster: [UInt8](repeating: 9, count: 11))
        let error = #expect(throws: MediaError.self) { try PortablePixmap.decode(file: path) }
        #expect(error?.code == .truncated)
        #expect(error?.path == path)
        #expect(error?.message.contains("12 bytes") == true)
        let headerOnly = directory.write("header.pgm", header: "P5\n4 # the height is missing\n", raster: [])
        #expect(throws: MediaError.self) { try PortablePixmap.decode(file: headerOnly) }
    }

    @Test func aTwoByteMaxvalIsRefusedAsUnsupported() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let path = directory.write("deep.pgm", header: "P5\n1 1\n65535\n", raster: [0xFF, 0xFF])
        let error = #expect(throws: MediaError.self) { try PortablePixmap.decode(file: path) }
        #expect(error?.code == .unsupportedMaxval)
        #expect(error?.path == path)
        #expect(error?.message.contains("65535") == true)
    }

    @Test func malformedHeadersAndOutOfRangeSamplesAreRejected() throws {
        let directory = ScratchDirectory()
        defer { directory.remove() }
        let cases: [(String, String, [UInt8])] = [
            ("letters.ppm", "P6\n2 x\n255\n", [UInt8](repeating: 0, count: 12)),
            ("zero.ppm", "P6\n0 1\n255\n", []),
            ("glued.pgm", "P5\n1 1\n255X", [0]),
            ("magic.pgm", "P5x1 1\n255\n", [0]),
            ("sample.pgm", "P5\n1 1\n100\n", [101]),
            ("maxval0.pgm", "P5\n1 1\n0\n", [0]),
        ]
        for (name, header, raster) in cases {
            let path = directory.write(name, header: header, raster: raster)
            let error = #expect(throws: MediaError.self, "\(name)") { try PortablePixmap.decode(file: path) }
            #expect(error?.code == .malformedHeader, "\(name)")
            #expect(error?.path == path)
        }
    }

    @Test func aMissingFileIsUnreadableWithItsErrno() {
        let error = #expect(throws: MediaError.self) { try PortablePixmap.decode(file: "/nonexistent/image.ppm") }
        #expect(error?.code == .unreadable)
        #expect(error?.path == "/nonexistent/image.ppm")
        #expect(error?.errno == 2)  // ENOENT
    }
}
