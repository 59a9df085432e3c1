# Server reflection (v1alpha and v1, the same messages; reflection.proto says which part):
# Debian's ruby-grpc has none, and rpcmeter, like grpcurl, finds a server's methods by it.
# The files come from the descriptor set build.sh wrote beside the stubs (gen/served.protoset).
require 'grpc'
require 'google/protobuf/descriptor_pb'
require 'reflection_services_pb'

module RubyLab
  class Reflection < Grpc::Reflection::V1alpha::ServerReflection::Service
    R = Grpc::Reflection::V1alpha

    def initialize(protoset_path, services)
      super()
      set = Google::Protobuf::FileDescriptorSet.decode(File.binread(protoset_path))
      @files = set.file.to_h { |f| [f.name, f] }
      @services = services
      @symbols = {} # full name of a message, enum, service or method => file name
      set.file.each do |f|
        prefix = f.package.empty? ? '' : "#{f.package}."
        f.message_type.each { |m| index_message(prefix, m, f.name) }
        f.enum_type.each { |e| @symbols["#{prefix}#{e.name}"] = f.name }
        f.service.each do |s|
          @symbols["#{prefix}#{s.name}"] = f.name
          s['method'].each { |m| @symbols["#{prefix}#{s.name}.#{m.name}"] = f.name }
        end
      end
    end

    # One answer per request, as each arrives (lazily: the client may keep its side open).
    def server_reflection_info(requests)
      requests.lazy.map { |req| answer(req) }
    end

    private

    def index_message(prefix, message, file)
      name = "#{prefix}#{message.name}"
      @symbols[name] = file
      message.nested_type.each { |m| index_message("#{name}.", m, file) }
      message.enum_type.each { |e| @symbols["#{name}.#{e.name}"] = file }
    end

    def answer(req)
      reply = R::ServerReflectionResponse.new(valid_host: req.host, original_request: req)
      case req.message_request
      when :list_services
        reply.list_services_response = R::ListServiceResponse.new(
          service: @services.map { |s| R::ServiceResponse.new(name: s) }
        )
      when :file_by_filename
        files(reply, req.file_by_filename, "no file #{req.file_by_filename}")
      when :file_containing_symbol
        sym = req.file_containing_symbol.delete_prefix('.')
        files(reply, @symbols[sym], "no symbol #{sym}")
      else
        not_found(reply, 'not answered by this server (no extensions)')
      end
      reply
    end

    # The file first, then what it imports, each once.
    def files(reply, name, missing)
      return not_found(reply, missing) unless @files.key?(name)

      order = []
      todo = [name]
      until todo.empty?
        n = todo.shift
        next if order.include?(n) || !@files.key?(n)

        order << n
        todo.concat(@files[n].dependency.to_a)
      end
      reply.file_descriptor_response = R::FileDescriptorResponse.new(
        file_descriptor_proto: order.map { |n| Google::Protobuf::FileDescriptorProto.encode(@files[n]) }
      )
    end

    def not_found(reply, message)
      reply.error_response = R::ErrorResponse.new(error_code: GRPC::Core::StatusCodes::NOT_FOUND, error_message: message)
    end
  end

  # The same service under v1's name: rpcmeter asks v1 first.
  class ReflectionV1 < Reflection
    self.service_name = 'grpc.reflection.v1.ServerReflection'
  end
end
