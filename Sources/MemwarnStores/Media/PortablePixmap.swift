/// Binary Netpbm images: PPM (`P6`, RGB) and PGM (`P5`, gray), one byte per sample.
///
/// The decoder follows the Netpbm specification: the magic number, then width, height and
/// maxval as ASCII decimals separated by whitespace (blanks, tabs, CR, LF, VT, FF), with
/// comments from `#` to the end of the line anywhere between them; then exactly one
/// whitespace byte and the raster. Samples are scaled from `0...maxval` to `0...255`.
/// Maxvals above 255 (two-byte samples) are refused; bytes after the raster (a further
/// image of a multi-image file) are ignored.
package enum PortablePixmap {
    /// A decoded image: 4 bytes per pixel (red, green, blue, alpha), rows top to bottom.
    package struct Image: Sendable, Hashable {
        /// The width in pixels.
        package var width: Int
        /// The height in pixels.
        package var height: Int
        /// `width × height × 4` bytes, RGBA8; alpha is always 255.
        package var rgba: [UInt8]

        /// Creates an image.
        package init(width: Int, height: Int, rgba: [UInt8]) {
            self.width = width
            self.height = height
            self.rgba = rgba
        }
    }

    /// The largest width or height accepted, a guard against absurd headers.
    package static let maximumDimension = 1 << 20

    /// Reads and decodes a PPM or PGM file.
    ///
    /// - Complexity: O(n) in the file's size.
    /// - Throws: ``MediaError`` naming the file: `.unreadable`, `.badMagic`,
    ///   `.malformedHeader`, `.unsupportedMaxval` or `.truncated`.
    package static func decode(file path: String) throws(MediaError) -> Image {
        try decode(MediaFile.read(path), path: path)
    }

    /// Decodes the bytes of a PPM or PGM file.
    ///
    /// - Parameters:
    ///   - bytes: the whole file.
    ///   - path: the file's name, for errors.
    /// - Complexity: O(n) in the pixels.
    /// - Throws: ``MediaError`` `.badMagic`, `.malformedHeader`, `.unsupportedMaxval` or
    ///   `.truncated`, naming `path`.
    package static func decode(_ bytes: [UInt8], path: String) throws(MediaError) -> Image {
        var parser = HeaderParser(bytes: bytes, path: path)
        let channels = try parser.magic()
        let width = try parser.field("width")
        let height = try parser.field("height")
        let maxval = try parser.field("maxval")
        try parser.rasterDelimiter()
        guard (1...maximumDimension).contains(width), (1...maximumDimension).contains(height) else {
            throw MediaError(.malformedHeader, "dimensions \(width)×\(height) are out of range 1...\(maximumDimension)", path: path)
        }
        guard maxval >= 1 && maxval <= 65535 else {
            throw MediaError(.malformedHeader, "maxval \(maxval) is out of range 1...65535", path: path)
        }
        guard maxval <= 255 else {
            throw MediaError(.unsupportedMaxval, "maxval \(maxval) needs two-byte samples; only maxval ≤ 255 is supported", path: path)
        }
        let pixels = width * height  // ≤ 2^40: no overflow
        let rasterBytes = pixels * channels
        let available = bytes.count - parser.offset
        guard available >= rasterBytes else {
            throw MediaError(.truncated, "raster needs \(rasterBytes) bytes for \(width)×\(height), file has \(available)", path: path)
        }
        var scale = [UInt8](repeating: 0, count: 256)
        for value in 0...maxval { scale[value] = UInt8((value * 255 + maxval / 2) / maxval) }
        let start = parser.offset
        var overMaxval = false
        let rgba = [UInt8](unsafeUninitializedCapacity: pixels * 4) { buffer, count in
            bytes.withUnsafeBufferPointer { source in
                var input = start
                for pixel in 0..<pixels {
                    let out = pixel * 4
                    if channels == 3 {
                        let r = source[input]
                        let g = source[input + 1]
                        let b = source[input + 2]
                        overMaxval = overMaxval || Int(max(r, g, b)) > maxval
                        buffer[out] = scale[Int(r)]
                        buffer[out + 1] = scale[Int(g)]
                        buffer[out + 2] = scale[Int(b)]
                    } else {
                        let gray = source[input]
                        overMaxval = overMaxval || Int(gray) > maxval
                        let scaled = scale[Int(gray)]
                        buffer[out] = scaled
                        buffer[out + 1] = scaled
                        buffer[out + 2] = scaled
                    }
                    buffer[out + 3] = 255
                    input += channels
                }
            }
            count = pixels * 4
        }
        guard !overMaxval else {
            throw MediaError(.malformedHeader, "a sample exceeds maxval \(maxval)", path: path)
        }
        return Image(width: width, height: height, rgba: rgba)
    }

    /// Writes a binary PPM (`P6`, maxval 255).
    ///
    /// - Parameters:
    ///   - comment: a `#` comment line after the magic number, if any (newlines in it
    ///     become spaces).
    ///   - pixel: the color of the pixel at `(x, y)`, called row by row.
    /// - Complexity: O(width × height).
    /// - Throws: ``MediaError`` `.unwritable`.
    package static func write(
        width: Int, height: Int, comment: String? = nil,
        pixel: (_ x: Int, _ y: Int) -> (red: UInt8, green: UInt8, blue: UInt8),
        to path: String
    ) throws(MediaError) {
        var bytes = header("P6", width: width, height: height, comment: comment)
        bytes.reserveCapacity(bytes.count + width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let color = pixel(x, y)
                bytes.append(color.red)
                bytes.append(color.green)
                bytes.append(color.blue)
            }
        }
        try MediaFile.write(bytes, to: path)
    }

    /// Writes a binary PGM (`P5`, maxval 255).
    ///
    /// - Parameters:
    ///   - comment: a `#` comment line after the magic number, if any.
    ///   - gray: the gray level of the pixel at `(x, y)`, called row by row.
    /// - Complexity: O(width × height).
    /// - Throws: ``MediaError`` `.unwritable`.
    package static func write(
        width: Int, height: Int, comment: String? = nil,
        gray: (_ x: Int, _ y: Int) -> UInt8,
        to path: String
    ) throws(MediaError) {
        var bytes = header("P5", width: width, height: height, comment: comment)
        bytes.reserveCapacity(bytes.count + width * height)
        for y in 0..<height {
            for x in 0..<width { bytes.append(gray(x, y)) }
        }
        try MediaFile.write(bytes, to: path)
    }

    private static func header(_ magic: String, width: Int, height: Int, comment: String?) -> [UInt8] {
        precondition(width > 0 && height > 0, "an image needs at least one pixel")
        var text = magic + "\n"
        if let comment {
            text += "# " + String(comment.map { $0.isNewline ? " " : $0 }) + "\n"
        }
        text += "\(width) \(height)\n255\n"
        return Array(text.utf8)
    }
}

/// Reads a Netpbm header field by field.
private struct HeaderParser {
    let bytes: [UInt8]
    let path: String
    private(set) var offset = 0

    init(bytes: [UInt8], path: String) {
        self.bytes = bytes
        self.path = path
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)  // space, tab, LF, VT, FF, CR
    }

    /// Reads the magic number; returns the bytes per pixel in the raster.
    mutating func magic() throws(MediaError) -> Int {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "P"), bytes[1] == UInt8(ascii: "5") || bytes[1] == UInt8(ascii: "6") else {
            let found = bytes.prefix(2).map { (0x21...0x7E).contains($0) ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16) }.joined()
            throw MediaError(.badMagic, "not a binary PPM (P6) or PGM (P5) file: starts with \"\(found)\"", path: path)
        }
        offset = 2
        try separator(after: "magic number")
        return bytes[1] == UInt8(ascii: "6") ? 3 : 1
    }

    /// Skips whitespace and comments, then reads a decimal field.
    mutating func field(_ name: String) throws(MediaError) -> Int {
        while offset < bytes.count {
            if Self.isWhitespace(bytes[offset]) {
                offset += 1
            } else if bytes[offset] == UInt8(ascii: "#") {
                while offset < bytes.count && bytes[offset] != 0x0A && bytes[offset] != 0x0D { offset += 1 }
            } else {
                break
            }
        }
        guard offset < bytes.count else {
            throw MediaError(.truncated, "file ends in the header, before the \(name)", path: path)
        }
        var value = 0
        let start = offset
        while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) {
            value = value * 10 + Int(bytes[offset] - UInt8(ascii: "0"))
            guard value <= 1 << 32 else {
                throw MediaError(.malformedHeader, "the \(name) is too large", path: path)
            }
            offset += 1
        }
        guard offset > start else {
            throw MediaError(.malformedHeader, "expected the \(name) at byte \(offset), found 0x\(String(bytes[offset], radix: 16))", path: path)
        }
        if name != "maxval" { try separator(after: name) }
        return value
    }

    /// The single whitespace byte between the maxval and the raster.
    mutating func rasterDelimiter() throws(MediaError) {
        guard offset < bytes.count else {
            throw MediaError(.truncated, "file ends after the maxval, before the raster", path: path)
        }
        guard Self.isWhitespace(bytes[offset]) else {
            throw MediaError(.malformedHeader, "expected one whitespace byte after the maxval, found 0x\(String(bytes[offset], radix: 16))", path: path)
        }
        offset += 1
    }

    /// Requires whitespace or a comment (or the end, reported by the next field) after a token.
    private func separator(after name: String) throws(MediaError) {
        guard offset < bytes.count else { return }
        let byte = bytes[offset]
        guard Self.isWhitespace(byte) || byte == UInt8(ascii: "#") else {
            throw MediaError(.malformedHeader, "expected whitespace after the \(name), found 0x\(String(byte, radix: 16))", path: path)
        }
    }
}
